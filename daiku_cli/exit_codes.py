"""One exit-status convention for every `daiku` command (the README's "Exit status" table).

- `OK` (0): done, and the answer is complete;
- `INCOMPLETE` (1): done, but the answer is not all that was asked: `plan` left pods
  unschedulable (each listed with its reason), `up` ended before the cluster settled;
- `BAD_INPUT` (2): input or usage refused, nothing done: the message names the file, object
  and field (Typer's own usage errors exit 2 too);
- `FAILED` (3): something daiku depends on failed: the cluster could not be read (`explain`),
  a process of the local stack died (`up`);
- `INTERRUPTED` (130): stopped by Ctrl-C.
"""

from __future__ import annotations

OK = 0
INCOMPLETE = 1
BAD_INPUT = 2
FAILED = 3
INTERRUPTED = 130
