#!/usr/bin/env python3
"""Download the UCI benchmark files and convert them into the CSVs that burn-bnn loads.

Each dataset listed in manifest.json (next to this script) is downloaded from UCI, converted
into a comma-separated file with a header and the target last, checked against the manifest's
sha256 and written to <out>/<name>/<name>.csv. A file whose checksum differs is never written,
so a successful run reproduces the exact bytes the Rust loaders accept.

    python3 datasets/fetch.py --out ~/bnn-data            # all datasets, from the internet
    python3 datasets/fetch.py --out ~/bnn-data yacht      # only some
    python3 datasets/fetch.py --from-raw DIR --out ~/bnn-data   # convert files you already have

Only the standard library is needed, except for two spreadsheets: concrete (.xls) needs
`pip install xlrd` and energy (.xlsx) needs `pip install openpyxl`.
"""

import argparse
import hashlib
import io
import json
import os
import sys
import tempfile
import urllib.request
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.json"
# The loaders look for X/shared/datasets beside a checkout at X/main; default to that place.
DEFAULT_OUT = HERE.parent.parent / "shared" / "datasets"
USER_AGENT = "burn-bnn datasets/fetch.py"


class FetchError(Exception):
    """A problem with one dataset; the others are still processed."""


# --- conversions: raw UCI bytes -> (header, rows of text tokens) ------------------------------
# Text sources keep every value token as written, so e.g. 0.150 stays 0.150.


def lines_of(raw: bytes) -> list[str]:
    """Non-blank lines, with CRLF or LF endings."""
    return [line for line in raw.decode("ascii").splitlines() if line.strip()]


def unquote(name: str) -> str:
    return name.strip().strip('"')


def convert_airfoil(raw: bytes):
    # Tab-separated, no header; names from the UCI attribute list.
    header = [
        "frequency",
        "angle_of_attack",
        "chord_length",
        "free_stream_velocity",
        "suction_side_displacement_thickness",
        "scaled_sound_pressure_level",
    ]
    return header, [line.split("\t") for line in lines_of(raw)]


def convert_bikesharing(raw: bytes):
    # Same columns as the Connecting-the-Dots file: drop the date, the season, and the two
    # counts that sum to the target (casual + registered == cnt).
    dropped = {"dteday", "season", "casual", "registered"}
    lines = lines_of(raw)
    names = lines[0].split(",")
    keep = [j for j, name in enumerate(names) if name not in dropped]
    rows = [line.split(",") for line in lines[1:]]
    return [names[j] for j in keep], [[row[j] for j in keep] for row in rows]


def convert_protein(raw: bytes):
    # Quoted header with the target RMSD first; move it to the end.
    lines = lines_of(raw)
    names = [unquote(n) for n in lines[0].split(",")]
    target = names.index("RMSD")

    def target_last(fields):
        return fields[:target] + fields[target + 1 :] + [fields[target]]

    return target_last(names), [target_last(line.split(",")) for line in lines[1:]]


def convert_yacht(raw: bytes):
    # Runs of spaces, a trailing space and an empty last line; no header.
    header = [
        "longitudinal_position_center_of_buoyancy",
        "prismatic_coefficient",
        "length_displacement_ratio",
        "beam_draught_ratio",
        "length_beam_ratio",
        "froude_number",
        "residuary_resistance",
    ]
    return header, [line.split() for line in lines_of(raw)]


def convert_wine_quality_red(raw: bytes):
    lines = lines_of(raw)
    header = [unquote(n) for n in lines[0].split(";")]
    return header, [line.split(";") for line in lines[1:]]


def spreadsheet_number(value) -> str:
    """At most 15 significant digits (Excel's display precision), no trailing zeros, so the
    double 61.887365759999994 becomes 61.88736576 and 540.0 becomes 540."""
    if not isinstance(value, (int, float)):
        raise FetchError(f"expected a number in the spreadsheet, found {value!r}")
    return "%.15g" % value


def convert_concrete(raw: bytes):
    try:
        import xlrd
    except ImportError:
        raise FetchError("concrete is an .xls spreadsheet: install the reader with `pip install xlrd`")
    sheet = xlrd.open_workbook(file_contents=raw).sheet_by_index(0)
    # Long headers such as "Cement (component 1)(kg in a m^3 mixture)" keep their leading name.
    header = [str(cell.value).split("(")[0].strip() for cell in sheet.row(0)]
    rows = [[spreadsheet_number(cell.value) for cell in sheet.row(i)] for i in range(1, sheet.nrows)]
    return header, rows


def convert_energy(raw: bytes):
    try:
        import openpyxl
    except ImportError:
        raise FetchError("energy is an .xlsx spreadsheet: install the reader with `pip install openpyxl`")
    sheet = openpyxl.load_workbook(io.BytesIO(raw), read_only=True, data_only=True).worksheets[0]
    # The sheet's used range has empty trailing rows and columns; drop them.
    cells = [list(row) for row in sheet.iter_rows(values_only=True)]
    cells = [row for row in cells if any(v is not None for v in row)]
    used = [j for j in range(len(cells[0])) if any(row[j] is not None for row in cells)]
    cells = [[row[j] for j in used] for row in cells]
    header = [str(name).strip() for name in cells[0]]
    # Y1 (heating load) is the target; Y2 (cooling load) is not used.
    keep = [j for j, name in enumerate(header) if name != "Y2"]
    rows = [[spreadsheet_number(row[j]) for j in keep] for row in cells[1:]]
    return [header[j] for j in keep], rows


CONVERTERS = {
    "airfoil": convert_airfoil,
    "bikesharing": convert_bikesharing,
    "concrete": convert_concrete,
    "energy": convert_energy,
    "protein": convert_protein,
    "yacht": convert_yacht,
    "wine-quality-red": convert_wine_quality_red,
}


def to_csv_bytes(header, rows) -> bytes:
    width = len(header)
    for number, row in enumerate(rows, start=2):
        if len(row) != width:
            raise FetchError(f"converted row {number} has {len(row)} fields, the header {width}")
    lines = [",".join(header)] + [",".join(field.strip() for field in row) for row in rows]
    return ("\n".join(lines) + "\n").encode("ascii")


# --- getting the raw file -------------------------------------------------------------------


def download(entry) -> bytes:
    """The raw file from the first download that works; UCI has moved files before, so each
    dataset lists the old direct link and the current zip."""
    failures = []
    for source in entry["downloads"]:
        url = source["url"]
        try:
            request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
            with urllib.request.urlopen(request, timeout=120) as response:
                data = response.read()
            member = source.get("zip_member")
            return extract_member(data, member) if member else data
        except (OSError, zipfile.BadZipFile, FetchError) as error:
            failures.append(f"{url}: {error}")
    raise FetchError("every download failed:\n  " + "\n  ".join(failures))


def extract_member(archive: bytes, member: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(archive)) as zipped:
        for name in zipped.namelist():
            if Path(name).name == member:
                return zipped.read(name)
        raise FetchError(f"the zip has no {member}; it contains {zipped.namelist()}")


def read_raw(entry, raw_dir: Path) -> bytes:
    candidates = [raw_dir / entry["name"] / entry["raw_file"], raw_dir / entry["raw_file"]]
    for path in candidates:
        if path.is_file():
            return path.read_bytes()
    raise FetchError("raw file not found; looked for " + " and ".join(str(p) for p in candidates))


# --- writing --------------------------------------------------------------------------------


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, path)


def process(entry, out_dir: Path, raw_dir, keep_raw: bool) -> str:
    target = out_dir / entry["file"]
    if target.is_file() and sha256_of(target.read_bytes()) == entry["sha256"]:
        return f"already present with the right checksum: {target}"
    raw = read_raw(entry, raw_dir) if raw_dir else download(entry)
    header, rows = CONVERTERS[entry["name"]](raw)
    data = to_csv_bytes(header, rows)
    actual = sha256_of(data)
    if actual != entry["sha256"]:
        raise FetchError(
            f"the converted file does not match the manifest: expected sha256 {entry['sha256']}, "
            f"got {actual}; the raw file is probably a different version (nothing was written)"
        )
    write_atomically(target, data)
    if keep_raw and not raw_dir:
        write_atomically(target.parent / entry["raw_file"], raw)
    return f"wrote {target} ({len(rows)} rows, sha256 ok)"


def main(argv=None) -> int:
    manifest = json.loads(MANIFEST.read_text())["datasets"]
    by_name = {entry["name"]: entry for entry in manifest}
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"datasets to fetch (default: all of {', '.join(by_name)})")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"data folder to write (default: {DEFAULT_OUT})")
    parser.add_argument(
        "--from-raw",
        type=Path,
        metavar="DIR",
        help="convert raw UCI files already in DIR/<name>/<raw file> or DIR/<raw file> instead of downloading",
    )
    parser.add_argument("--keep-raw", action="store_true", help="also save each downloaded raw file beside its CSV")
    parser.add_argument("--list", action="store_true", help="list the datasets and their raw files, then exit")
    args = parser.parse_args(argv)

    if args.list:
        for entry in manifest:
            print(f"{entry['name']:<18} {entry['file']:<40} raw: {entry['raw_file']}")
        return 0
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        parser.error(f"unknown dataset(s) {', '.join(unknown)}; known: {', '.join(by_name)}")

    failed = 0
    for name in args.names or list(by_name):
        try:
            print(f"{name}: {process(by_name[name], args.out, args.from_raw, args.keep_raw)}")
        except FetchError as error:
            failed += 1
            print(f"{name}: FAILED: {error}", file=sys.stderr)
    if failed:
        print(f"{failed} dataset(s) failed", file=sys.stderr)
        return 1
    print(f"done; the loaders find this folder via BNN_DATA_DIR={args.out.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
