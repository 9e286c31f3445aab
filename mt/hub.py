"""Models on the Hugging Face Hub: `hf:OWNER/NAME`, or `hf:OWNER/NAME@REVISION` (a branch, tag or commit),
wherever a model is named (translate -c, mt-evaluate, mt-score, mt-serve, mt-info, mt-export,
mt.load_translator, train.init_from). The repository holds a checkpoint as final.pt (a run's
checkpoints/final.pt, uploaded) or an mt-export directory's files. They are downloaded once into the Hub's
cache (~/.cache/huggingface/hub; HF_HUB_CACHE moves it) and read from there after, offline too.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from mt.errors import MTError

PREFIX = "hf:"
# what a model repository may hold that decoding reads: a checkpoint (at the top, or a run's checkpoints/
# folder uploaded whole: never its last.pt or stepN.pt), or an mt-export directory's files
MODEL_FILES = ["final.pt", "checkpoints/final.pt", "*.json", "*.bin", "*.model", "README.md"]


def reachable(timeout: float = 3.0) -> bool:
    """Whether the Hub answers here: without a connection its client would retry for minutes, so callers go
    offline at once instead (a cached copy still loads, a missing one fails fast)."""
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def is_hub_name(name) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


def local_model(name):
    """The local folder of a Hub model, downloaded unless cached (any other name as it is given)."""
    if not is_hub_name(name):
        return name
    repo, _, revision = name[len(PREFIX) :].removeprefix("//").partition("@")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise MTError(f"{name}: a Hub model is named hf:OWNER/NAME or hf:OWNER/NAME@REVISION")
    from huggingface_hub import snapshot_download  # here: only a Hub name needs it

    offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on") or not reachable()
    try:
        folder = snapshot_download(
            repo, revision=revision or None, allow_patterns=MODEL_FILES, local_files_only=offline
        )
    except Exception as err:  # the client's errors differ between its versions: named by class
        raise MTError(f"{name}: {failure(err, offline)}") from None
    found = Path(folder)
    if not any((found / f).is_file() for f in ("final.pt", "checkpoints/final.pt", "mt_export.json")):
        raise MTError(f"{name}: the repository holds neither final.pt nor an mt-export directory (mt_export.json)")
    return str(found)


def failure(err: Exception, offline: bool) -> str:
    """What a failed download means, in words a user can act on."""
    kind = type(err).__name__
    if offline:
        return "not in the Hub's local cache, and the Hub cannot be reached from here (offline?)"
    if kind in ("RepositoryNotFoundError", "GatedRepoError"):
        return "no such model repository on the Hub, or a private or gated one (log in: hf auth login)"
    if kind == "RevisionNotFoundError":
        return "the repository has no such revision (branch, tag or commit)"
    said = " ".join(str(err).split())[:200]
    return f"cannot download from the Hub ({kind}: {said})" if said else f"cannot download from the Hub ({kind})"
