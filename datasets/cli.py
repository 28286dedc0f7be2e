"""``portabench datasets``: list, info, fetch, register, generate."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from tabulate import tabulate

from .errors import DatasetError
from .paths import check_writable
from .random import check_seed


def _describe(obj: Any) -> dict[str, Any]:
    """Measured facts of a loaded or generated dataset, whatever its kind."""
    from .tensors import SparseTensor

    if isinstance(obj, SparseTensor):
        from .tensors.standin import skew_summary

        return {"dims": obj.dims, "nnz": obj.nnz} | skew_summary(obj)
    if hasattr(obj, "describe"):
        return obj.describe()
    return {"object": repr(obj)}


def _print_facts(title: str, facts: dict[str, Any]) -> None:
    print(title)
    for key, value in facts.items():
        print(f"  {key}: {value}")


def cmd_list(args: argparse.Namespace) -> int:
    from . import list_datasets
    from .cache import cached_path

    rows = []
    for d in list_datasets(args.kind):
        if d.shipped:
            real = "shipped"
        elif d.remote:
            real = "cached" if cached_path(d).exists() else "not fetched"
        else:
            real = "none"
        rows.append([d.name, d.kind, real, d.quick_spec if d.standin else "", d.summary])
    print(tabulate(rows, headers=["name", "kind", "real data", "quick stand-in", "what"]))
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from . import load, parse_spec
    from .cache import cached_path, expected_sha256

    dataset, scale = parse_spec(args.spec)
    if scale is not None:
        check_seed(args.seed)
        start = time.perf_counter()
        obj = load(args.spec, seed=args.seed)
        seconds = time.perf_counter() - start
        _print_facts(f"{args.spec} (stand-in, seed {args.seed}, generated in {seconds:.2f} s)", _describe(obj))
        return 0
    facts: dict[str, Any] = {"kind": dataset.kind, "summary": dataset.summary} | dict(dataset.facts)
    facts["sources"] = ", ".join(dataset.sources)
    if dataset.standin:
        facts["quick stand-in"] = dataset.quick_spec
    if dataset.shipped or dataset.remote:
        path = cached_path(dataset)
        facts["file"] = f"{path} ({'present' if path.exists() else 'not fetched'})"
        if dataset.remote:
            facts["sha256"] = expected_sha256(dataset) or "none yet (recorded at first download)"
    _print_facts(dataset.name, facts)
    if args.stats:
        obj = load(dataset.name, download=False)
        _print_facts("measured", _describe(obj))
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    from . import fetch, get_dataset

    for name in args.names:
        path = fetch(get_dataset(name), progress=not args.quiet)
        print(f"{name}: {path}")
    return 0


def cmd_register(args: argparse.Namespace) -> int:
    from . import get_dataset, register_local

    path = register_local(get_dataset(args.name), args.file)
    print(f"{args.name}: registered {args.file} as {path}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from . import get_dataset

    dataset = get_dataset(args.name)
    if dataset.standin is None:
        raise DatasetError(f"dataset {dataset.name!r} has no stand-in generator")
    if dataset.write is None:
        raise DatasetError(f"dataset {dataset.name!r} has no writer")
    scale = args.scale if args.scale is not None else dataset.default_scale
    if not scale > 0:
        raise DatasetError(f"--scale must be positive, got {scale}")
    check_seed(args.seed)
    # Where it goes is checked before the (maybe long) generation; the folder is made only to write.
    if args.out.is_dir():
        raise DatasetError(f"--out {args.out} is a folder: give the file to write")
    check_writable(args.out.parent, "--out")
    start = time.perf_counter()
    obj = dataset.standin(scale, args.seed)
    generated = time.perf_counter() - start
    args.out.parent.mkdir(parents=True, exist_ok=True)
    dataset.write(obj, args.out)
    written = time.perf_counter() - start - generated
    print(f"{dataset.name}@{scale:g} (seed {args.seed}): generated in {generated:.2f} s, "
          f"written to {args.out} in {written:.2f} s")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``datasets`` and its subcommands to the ``portabench`` parser."""
    parser = sub.add_parser("datasets", help="list, inspect, download and generate input datasets")
    dsub = parser.add_subparsers(dest="datasets_command", required=True)

    p = dsub.add_parser("list", help="every registered dataset and where its data is")
    p.add_argument("--kind", choices=["tensor", "matrix", "batched"])
    p.set_defaults(func=cmd_list)

    p = dsub.add_parser("info", help="published facts of NAME; measured ones of a stand-in NAME@S")
    p.add_argument("spec", metavar="NAME[@S]")
    p.add_argument("--seed", type=int, default=0, help="stand-in seed (default 0)")
    p.add_argument("--stats", action="store_true", help="also load the real data and measure it")
    p.set_defaults(func=cmd_info)

    p = dsub.add_parser("fetch", help="download real datasets into the cache ($PORTABENCH_DATA)")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_fetch)

    p = dsub.add_parser("register", help="put a copy of NAME obtained by hand into the cache")
    p.add_argument("name", metavar="NAME")
    p.add_argument("file", type=Path, metavar="FILE")
    p.set_defaults(func=cmd_register)

    p = dsub.add_parser("generate", help="write the seeded stand-in of NAME to a file")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--scale", type=float, help="size relative to the real dataset (default: its quick scale)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True, metavar="FILE")
    p.set_defaults(func=cmd_generate)
