"""The contrastive optimizer's parts: exemplar database, bucket sampler, prompts,
answer parser, generation backends, built-in rewrites."""
