"""Reading the files of a dataset uploaded as one zip (a datasets folder, RAGTruth's two files).

The upload page and the API take one file, so a dataset of several files comes zipped. The
named members are copied to a temporary directory (a reader needs seekable files), each
refused once it grows past :data:`MAX_MEMBER_BYTES`, so a crafted zip cannot fill the disk.
"""

from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import IO

from labeling.importers.record_errors import RecordError, echo

#: The largest member of a dataset zip that is extracted (uncompressed bytes).
MAX_MEMBER_BYTES = 4 << 30


class ZippedFiles:
    """The members of a zip that sit at its top or in its one folder, extracted on demand.

    ``marker`` is a file name that must occur exactly once: its folder is the dataset's folder;
    ``filename`` and ``what`` (what the zip should hold) word the errors.

    Raises:
        RecordError: not a zip, or ``marker`` missing, repeated or deeper than one folder.
    """

    def __init__(self, stream: IO[bytes], filename: str, marker: str, what: str) -> None:
        try:
            self.archive = zipfile.ZipFile(stream)
        except (zipfile.BadZipFile, OSError) as exc:
            raise RecordError(filename, "(file)", f"not a readable zip ({exc})") from None
        self.filename = filename
        self.members = {
            PurePosixPath(i.filename): i for i in self.archive.infolist() if not i.is_dir()
        }
        markers = [path for path in self.members if path.name == marker]
        if len(markers) != 1 or len(markers[0].parts) > 2:
            self.archive.close()
            raise RecordError(filename, "(file)", f"expected a zip of {what}")
        self.folder = markers[0].parent
        self._temporary = tempfile.TemporaryDirectory(prefix="certlabel-import-")

    def has(self, name: str) -> bool:
        """Whether the dataset's folder holds the member ``name``."""
        return self.folder / name in self.members

    def extract(self, name: str) -> Path:
        """Copy the member ``name`` of the dataset's folder to a temporary file; return its path.

        Raises:
            RecordError: no such member, or larger than :data:`MAX_MEMBER_BYTES`.
        """
        info = self.members.get(self.folder / name)
        if info is None:
            raise RecordError(self.filename, "(file)", f"the zip holds no {echo(name)}")
        target = Path(self._temporary.name) / PurePosixPath(name).name
        copied = 0
        with self.archive.open(info) as member, target.open("wb") as out:
            while block := member.read(1 << 20):
                copied += len(block)
                if copied > MAX_MEMBER_BYTES:
                    raise RecordError(
                        self.filename,
                        "(file)",
                        f"zip member {echo(name)} is larger than {MAX_MEMBER_BYTES} bytes",
                    )
                out.write(block)
        return target

    def close(self) -> None:
        """Close the zip and delete the extracted files."""
        self.archive.close()
        self._temporary.cleanup()
