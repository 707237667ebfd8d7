"""A wiki page with one runbook: a vLLM server block, a throughput client swept over
CONCURRENCY=1,4, and its serving-results and history regions, empty for `wiki runbook render` to
fill from records. The hostile-record tests write it into a tree of their own."""

from __future__ import annotations


def sweep_page(runbook: str, title: str) -> str:
    """The page's Markdown, with `runbook` as the server block's id."""
    return f"""---
title: {title}
status: experimental
---
# {title}

```{{ .bash #{runbook} .runbook-server engine=vllm gpus=1 }}
vllm serve org/model --port 8000
```

```{{ .bash .runbook-client for={runbook} name=throughput sweep="CONCURRENCY=1,4" }}
vllm bench serve --model org/model --max-concurrency "${{CONCURRENCY:-1}}"
```

## Results

<!-- wiki:results runbook={runbook} view=serving -->
<!-- wiki:end -->

## History

<!-- wiki:results runbook={runbook} view=history -->
<!-- wiki:end -->
"""
