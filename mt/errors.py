"""User-facing errors: one clear line for the user, a traceback only when asked for; and how messages count."""

from __future__ import annotations

import functools
import logging
import os
import sys
from pathlib import Path


def counted(count: int, noun: str) -> str:
    """A count for a message, its noun in the number it needs: "1 line", "2 lines", "29,000 lines"."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


class MTError(Exception):
    """A problem the user can fix (bad input, bad config, missing file): printed as one line."""


class Interrupted(MTError):
    """Stopped on a signal after saving what is needed to resume."""


class StoppedAfter(KeyboardInterrupt):
    """Ctrl-C in a command that writes as it goes: how much of its output is complete."""

    def __init__(self, done: int, noun: str, output: str | None, writing: bool = False):
        """writing: stopped while writing the next ones out, some of which may be there too."""
        where = f" in {output}" if output else ""
        more = ", and maybe some of the next ones" if writing else ""
        if done == 0:
            more = ", though some of the first ones may be" if writing else ""
            super().__init__(f"no {noun} is {'sure to be ' if writing else ''}written{where} yet{more}")
            return
        written = f"the first {noun} is written" if done == 1 else f"the first {counted(done, noun)} are written"
        super().__init__(f"{written}{where}{more}")


class MissingSplit(MTError):
    """A split the config names is not there at all: no file of it in the folder, no such split in the dataset."""


def debug_enabled() -> bool:
    return os.environ.get("MT_DEBUG", "") not in ("", "0")


def enable_debug() -> None:
    """Tracebacks on for the rest of the process (what `--debug` asks for)."""
    os.environ["MT_DEBUG"] = "1"


def take_debug_flag(argv: list[str]) -> None:
    """`--debug` on a Hydra command line (which Hydra would reject): remove it, turn tracebacks on."""
    if "--debug" in argv:
        argv.remove("--debug")
        enable_debug()
        os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra shows the whole traceback, not its short report


class _OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


def warnings_as_lines() -> None:
    """For commands that do not log (translate, mt-evaluate, mt-export): what the library warns of reaches
    stderr as 'warning: ...', like the commands' own lines, rather than as a bare message."""
    root = logging.getLogger()
    if any(isinstance(h.formatter, _OneLine) for h in root.handlers):
        return  # called before in this process
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    handler.setLevel(logging.WARNING)
    root.addHandler(handler)


def files_read(path: str | os.PathLike) -> list[Path]:
    """The files a command reads when given path: a file itself; a run directory its checkpoints (its
    model is one of them: RUN/checkpoints/final.pt, or best.pt before the run ends); any other directory
    (an export) each of its files."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    folder = path / "checkpoints" if (path / "checkpoints").is_dir() else path
    return [file for file in folder.iterdir() if file.is_file()]


def check_output_file(path: str | None, flag: str, others: dict[str, object] | None = None) -> None:
    """Refuse, before any work, an output file that cannot be written where it is asked for (its folder
    missing, or a folder in its place), rather than after the translating is done; or that is one of the
    command's other files (others: flag -> path, or a list of paths; a directory stands for the files_read
    in it): opening it for writing would empty an input before it is read to the end, or a model."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise MTError(f"{flag} {path}: is a directory, expected a file to write")
    for other_flag, paths in (others or {}).items() if target.exists() else ():
        for given in paths if isinstance(paths, (list, tuple)) else [paths]:
            for other in files_read(given) if given else []:
                if other.exists() and os.path.samefile(target, other):
                    raise MTError(f"{flag} {path}: is the {other_flag} file too; give {flag} a file of its own")
    folder = target.parent
    if not folder.is_dir():
        raise MTError(f"{flag} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise MTError(f"{flag} {path}: not writable here")


def said_error(lines: list[str]) -> str | None:
    """The last one-line error among a command's output lines (printed by report_errors, or logged by a
    Hydra task as "[ERROR] - error: ..."), without its "error: "; None if it said none."""
    said = [line for line in lines if line.startswith("error: ") or "[ERROR] - error: " in line]
    return said[-1].split("error: ", 1)[1] if said else None


def report_errors(main):
    """Wrap a command-line entry point: MTError -> 'error: ...' on stderr and exit status 2."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except MTError as err:
            if debug_enabled():
                raise
            print(f"error: {err}", file=sys.stderr)
            sys.exit(2)
        except KeyboardInterrupt as stop:  # its message, if any, says what was done (StoppedAfter)
            print("interrupted" + (f": {stop}" if str(stop) else ""), file=sys.stderr)
            sys.exit(130)
        except BrokenPipeError:  # the reader went away (`translate ... | head`): stop quietly, as Unix tools do
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
            sys.exit(141)
        except OSError as err:  # a file the system refused (disk full, permissions, ...): one line, naming it
            if debug_enabled():
                raise
            print(f"error: {err.filename + ': ' if err.filename else ''}{err.strerror or err}", file=sys.stderr)
            sys.exit(2)

    return wrapper


def terms_missed_warning(count: int, noun: str) -> str:
    """The line that says how many translations lack a required term (noun: what was decoded)."""
    lines = f"{noun} lacks" if count == 1 else f"{noun}s lack"
    return (
        f"warning: the translation of {count} {lines} a required term: no hypothesis held them all by the length "
        "limit (a larger --beam or --max-len-b may)"
    )


def truncation_warning(count: int, noun: str, limit: int) -> str:
    """The line that says how many inputs (noun: "line", "source") were cut to `limit` pieces."""
    if count == 1:
        return f"warning: 1 {noun} was longer than {limit} pieces and was truncated"
    return f"warning: {count} {noun}s were longer than {limit} pieces and were truncated"
