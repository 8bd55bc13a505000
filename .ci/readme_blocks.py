"""The shell blocks of one README section, one file each, for ``.ci/first-run`` to run.

``python3 readme_blocks.py README.md HEADING OUTDIR NAME [COUNT]`` writes the ```` ```bash ````
blocks between the heading line ``HEADING`` (``## First run``) and the next heading of any
level to ``OUTDIR/NAME-1.sh``, ``NAME-2.sh``, ... exactly as README shows them, and prints
their paths, one a line. ``COUNT`` keeps only the first blocks. A section that is missing or
has no shell block is an error naming it: a README restructured must not turn the check into
one that runs nothing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
HEADING = re.compile(r"#{1,6} ")


def section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading (a ``#`` line inside a fence is code)."""
    lines = text.splitlines(keepends=True)
    try:
        start = next(i for i, line in enumerate(lines) if line.rstrip("\n") == heading)
    except StopIteration:
        raise SystemExit(f"readme_blocks: README has no heading {heading!r}") from None
    kept: list[str] = []
    fenced = False
    for line in lines[start + 1 :]:
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and HEADING.match(line):
            break
        kept.append(line)
    return "".join(kept)


def main(argv: list[str]) -> int:
    readme, heading, outdir, name, *count = argv
    blocks = BLOCK.findall(section(Path(readme).read_text(encoding="utf-8"), heading))
    if count:
        blocks = blocks[: int(count[0])]
    if not blocks:
        raise SystemExit(f"readme_blocks: README's {heading!r} has no ```bash block")
    for number, block in enumerate(blocks, 1):
        path = Path(outdir) / f"{name}-{number}.sh"
        path.write_text(block, encoding="utf-8")
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
