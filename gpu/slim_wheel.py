#!/usr/bin/env python3
"""Write a copy of a wheel without some of its members, with a regenerated RECORD.

    slim_wheel.py IN.whl OUT_DIR --drop PATTERN [--drop PATTERN ...]

PATTERN is matched against member paths inside the wheel (shell-style wildcards via
fnmatch; "*" also crosses "/"). A pattern ending in "/" drops the whole directory.
Every pattern must match at least one member, so a changed wheel layout fails loudly
instead of silently producing an unexpected result.

The output keeps the input's file name, so pip treats it as the same distribution.
RECORD is rewritten from the bytes actually written (sha256 + size per file), and
wheel signature files (RECORD.jws / RECORD.p7s) are dropped because they would no
longer match. Members are streamed, so multi-GiB wheels need little memory.
"""

import argparse
import base64
import fnmatch
import hashlib
import os
import sys
import tempfile
import zipfile

CHUNK = 1 << 20


def is_dropped(name, patterns):
    for pat in patterns:
        if pat.endswith("/"):
            if name.startswith(pat):
                return pat
        elif fnmatch.fnmatchcase(name, pat):
            return pat
    return None


def record_digest(h):
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode("ascii")


def slim(src, out_dir, patterns):
    os.makedirs(out_dir, exist_ok=True)
    dst = os.path.join(out_dir, os.path.basename(src))
    if os.path.abspath(dst) == os.path.abspath(src):
        sys.exit("slim_wheel: OUT_DIR must differ from the input wheel's directory")

    with zipfile.ZipFile(src) as zin:
        infos = zin.infolist()
        records = [i.filename for i in infos if i.filename.endswith(".dist-info/RECORD") and i.filename.count("/") == 1]
        if len(records) != 1:
            sys.exit(f"slim_wheel: expected exactly one top-level .dist-info/RECORD in {src}")
        record_name = records[0]
        dist_info = record_name.rsplit("/", 1)[0] + "/"
        signatures = {dist_info + "RECORD.jws", dist_info + "RECORD.p7s"}

        used = {p: 0 for p in patterns}
        dropped_bytes = 0
        dropped_files = 0
        kept = []
        for info in infos:
            name = info.filename
            if name == record_name or name in signatures:
                continue
            if name.startswith(dist_info):
                if is_dropped(name, patterns):
                    sys.exit(f"slim_wheel: refusing to drop metadata file {name}")
                kept.append(info)
                continue
            pat = is_dropped(name, patterns)
            if pat is not None:
                used[pat] += 1
                if not info.is_dir():
                    dropped_files += 1
                    dropped_bytes += info.file_size
                continue
            kept.append(info)

        unused = [p for p, n in used.items() if n == 0]
        if unused:
            sys.exit(f"slim_wheel: pattern(s) matched nothing in {os.path.basename(src)}: " + ", ".join(unused))

        # .dist-info members go last (as the wheel format recommends), RECORD at the very end.
        kept.sort(key=lambda i: i.filename.startswith(dist_info))

        fd, tmp = tempfile.mkstemp(prefix=".slim-", suffix=".whl", dir=out_dir)
        os.close(fd)
        try:
            lines = []
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zout:
                for info in kept:
                    zi = zipfile.ZipInfo(info.filename, date_time=info.date_time)
                    zi.external_attr = info.external_attr
                    zi.create_system = info.create_system
                    if info.is_dir():
                        zout.writestr(zi, b"")
                        continue
                    zi.compress_type = zipfile.ZIP_DEFLATED
                    h = hashlib.sha256()
                    size = 0
                    with zin.open(info) as fin, zout.open(zi, "w", force_zip64=True) as fout:
                        while True:
                            buf = fin.read(CHUNK)
                            if not buf:
                                break
                            h.update(buf)
                            size += len(buf)
                            fout.write(buf)
                    lines.append(f"{info.filename},{record_digest(h)},{size}")
                lines.append(f"{record_name},,")
                zi = zipfile.ZipInfo(record_name, date_time=infos[-1].date_time)
                zi.external_attr = 0o644 << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                zout.writestr(zi, "\n".join(lines) + "\n")
            with zipfile.ZipFile(tmp) as check:
                bad = check.testzip()
                if bad is not None:
                    sys.exit(f"slim_wheel: corrupt member {bad} in output")
            os.replace(tmp, dst)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise

    mib = 1 << 20
    print(
        f"slim_wheel: {os.path.basename(src)}: dropped {dropped_files} files "
        f"({dropped_bytes / mib:.1f} MiB unpacked); wheel "
        f"{os.path.getsize(src) / mib:.1f} MiB -> {os.path.getsize(dst) / mib:.1f} MiB"
    )
    return dst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel")
    ap.add_argument("out_dir")
    ap.add_argument("--drop", action="append", required=True, metavar="PATTERN")
    args = ap.parse_args()
    slim(args.wheel, args.out_dir, args.drop)


if __name__ == "__main__":
    main()
