"""What engines and client tools are and how their commands read: the facts catalog (every
engine-specific fact as data), the shell reader, launcher and compose reading, result parsers,
log markers, failure messages and secret masking. Depends on nothing else in runbook/."""
