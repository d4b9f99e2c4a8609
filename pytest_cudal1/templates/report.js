/* Sorting and filtering of the report's tables; no server, no external code. */
(function () {
  "use strict";

  function cellKey(row, index, numeric) {
    var cell = row.cells[index];
    if (!cell) { return null; }
    var raw = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent.trim();
    if (numeric) {
      var v = parseFloat(raw);
      return isNaN(v) ? null : v;
    }
    return raw === "" || raw === "\u2014" ? null : raw.toLowerCase();
  }

  function sortTable(table, th) {
    var index = parseInt(th.getAttribute("data-sort-index"), 10);
    var numeric = th.getAttribute("data-sort-type") === "num";
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    table.querySelectorAll("th[aria-sort]").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var keyed = rows.map(function (row, i) { return { row: row, key: cellKey(row, index, numeric), i: i }; });
    keyed.sort(function (a, b) {
      if (a.key === null || b.key === null) {  /* missing values last, whatever the direction */
        return a.key === b.key ? a.i - b.i : (a.key === null ? 1 : -1);
      }
      if (a.key < b.key) { return -dir; }
      if (a.key > b.key) { return dir; }
      return a.i - b.i;
    });
    keyed.forEach(function (k) { body.appendChild(k.row); });
  }

  function applyFilters(box) {
    var table = document.getElementById(box.getAttribute("data-for"));
    if (!table) { return; }
    var text = (box.querySelector("input[type=search]") || { value: "" }).value.trim().toLowerCase();
    var selects = box.querySelectorAll("select[data-attr]");
    var shown = 0, total = 0;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
      var ok = !text || row.textContent.toLowerCase().indexOf(text) !== -1;
      Array.prototype.forEach.call(selects, function (sel) {
        if (!ok || sel.value === "") { return; }
        var have = (row.getAttribute(sel.getAttribute("data-attr")) || "").split(" ");
        ok = have.indexOf(sel.value) !== -1;
      });
      row.classList.toggle("hidden", !ok);
      total += 1;
      if (ok) { shown += 1; }
    });
    var count = box.querySelector(".count");
    if (count) { count.textContent = shown + " of " + total + " rows"; }
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th[data-sort-index]").forEach(function (th) {
      th.setAttribute("title", "click to sort");
      th.addEventListener("click", function () { sortTable(table, th); });
    });
  });
  document.querySelectorAll(".filters[data-for]").forEach(function (box) {
    box.querySelectorAll("input, select").forEach(function (el) {
      el.addEventListener("input", function () { applyFilters(box); });
      el.addEventListener("change", function () { applyFilters(box); });
    });
    applyFilters(box);
  });
  document.documentElement.setAttribute("data-ready", "1");
}());
