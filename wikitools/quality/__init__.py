"""Quality receipts measured through an engine's own API: KLD captures and scores (`kld`,
`capture`, `tokens`) and correctness probes (`probe`). Used by the `wiki kld` and `wiki probe`
commands, which runbook client blocks run like any other client tool."""
