"""The contrastive optimizer's parts: exemplar database, bucket sampler, prompts, answer parser, backends, built-in rewrites."""
