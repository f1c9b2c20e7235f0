"""Packs the wheel of crates/python from an extension module cargo already built (`cargo xtask test`'s
workspace build): the package's Python files, the module as `kgrag/_native.abi3.so`, and the metadata
maturin writes for the package (`maturin pep517 write-dist-info`), with the RECORD of every file.

    python pack_wheel.py EXTENSION PYTHON_SOURCE DIST_INFO OUT_DIR
"""

import base64
import hashlib
import pathlib
import sys
import zipfile


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main() -> None:
    extension, source, dist_info, out = (pathlib.Path(a) for a in sys.argv[1:5])
    files = []
    # The package's sources only: not a module a `maturin develop` or an editable install left beside them.
    for path in sorted((source / "kgrag").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in {".py", ".pyi", ".typed"}:
            files.append((path.relative_to(source).as_posix(), path.read_bytes()))
    files.append(("kgrag/_native.abi3.so", extension.read_bytes()))
    for path in sorted(dist_info.rglob("*")):
        if path.is_file():
            files.append((f"{dist_info.name}/{path.relative_to(dist_info).as_posix()}", path.read_bytes()))
    names = [name for name, _ in files]
    if len(set(names)) != len(names):
        raise SystemExit(f"two files of the wheel have the same name: {sorted(names)}")
    wheel = (dist_info / "WHEEL").read_text()
    tag = next(line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:"))
    name_version = dist_info.name[: -len(".dist-info")]
    target = out / f"{name_version}-{tag}.whl"
    record = f"{dist_info.name}/RECORD"
    lines = [f"{name},{digest(data)},{len(data)}" for name, data in files] + [f"{record},,"]
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o100755 if name.endswith(".so") else 0o100644) << 16  # regular files
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data, compresslevel=1)
        z.writestr(zipfile.ZipInfo(record, date_time=(1980, 1, 1, 0, 0, 0)), "\n".join(lines) + "\n")
    print(target)


if __name__ == "__main__":
    main()
