"""Benchmark: load and prepare a 10,000-resource template; records figures in docs/benchmarks.md.

The template is a tree of dependencies: resource i reads ``get_attr`` of its parent (i // 2),
names its grandparent with ``get_resource`` and ``depends_on`` the resource i // 3, with
OS::Heat::TestResource and OS::Heat::Value from the real plugin registry.
Run: ``python bench/bench_validate.py [--resources N] [--no-record]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from _report import provenance, write_section
from converge.core.template import StackIdentity, load_template, prepare_stack
from converge.resources.registry import default_registry


def make_template(count: int) -> str:
    lines = [
        "heat_template_version: 2021-04-16",
        "parameters:",
        "  prefix: {type: string, default: node}",
        "resources:",
        "  r0:",
        "    type: OS::Heat::TestResource",
        "    properties: {value: {get_param: prefix}}",
    ]
    for i in range(1, count):
        kind = "OS::Heat::Value" if i % 5 == 0 else "OS::Heat::TestResource"
        attribute = "value" if (i // 2) % 5 == 0 and i // 2 else "output"
        lines += [
            f"  r{i}:",
            f"    type: {kind}",
            "    properties:",
            "      value:",
            "        str_replace:",
            "          template: $parent/$grand",
            "          params:",
            f"            $parent: {{get_attr: [r{i // 2}, {attribute}]}}",
            f"            $grand: {{get_resource: r{i // 4}}}",
            f"    depends_on: [r{i // 3}]",
        ]
    last = "value" if (count - 1) % 5 == 0 else "output"
    lines += ["outputs:", "  last:", f"    value: {{get_attr: [r{count - 1}, {last}]}}"]
    return "\n".join(lines) + "\n"


def measure(count: int, rounds: int) -> dict[str, float]:
    text = make_template(count)
    schemas = default_registry()
    identity = StackIdentity("bench", "bench-id", "bench-project")
    json_text = json.dumps(load_template(text, "bench.yaml").data)
    best = {
        "load": float("inf"),
        "prepare": float("inf"),
        "total": float("inf"),
        "load_json": float("inf"),
    }
    for _ in range(rounds):
        start = time.perf_counter()
        template = load_template(text, "bench.yaml")
        loaded = time.perf_counter()
        definition = prepare_stack(template, identity=identity, schemas=schemas)
        done = time.perf_counter()
        definition.graph().topological_order()
        assert len(definition.resources) == count
        best["load"] = min(best["load"], loaded - start)
        best["prepare"] = min(best["prepare"], done - loaded)
        best["total"] = min(best["total"], done - start)
        start = time.perf_counter()
        load_template(json_text, "bench.json")
        best["load_json"] = min(best["load_json"], time.perf_counter() - start)
    best["first_line"] = _first_line(text, count)
    best["bytes"] = len(text.encode())
    return best


def _first_line(text: str, count: int) -> float:
    """Seconds for the first line number asked of a loaded template (what an error costs
    once: the careful builder makes the line map then)."""
    template = load_template(text, "bench.yaml")
    last = f"r{count - 1}"
    start = time.perf_counter()
    line = template.source_map.line_of(("resources", last, "type"))
    elapsed = time.perf_counter() - start
    assert line is not None and text.splitlines()[line - 2] == f"  {last}:", line
    return elapsed


TARGET_SECONDS = 1.0


def record(count: int, rounds: int, figures: dict[str, float], load_average: str) -> None:
    met = "met" if figures["total"] < TARGET_SECONDS else "**missed**"
    write_section(
        "bench_validate",
        [
            "## Template validation (`bench/bench_validate.py`)",
            "",
            f"{count} resources ({figures['bytes'] / 1e6:.1f} MB of YAML), best of {rounds} rounds:",
            "",
            "| step | seconds |",
            "|---|---|",
            f"| load_template | {figures['load']:.3f} |",
            f"| prepare_stack | {figures['prepare']:.3f} |",
            f"| total | {figures['total']:.3f} |",
            f"| load_template, same template as JSON | {figures['load_json']:.3f} |",
            f"| first line number asked of the loaded template | {figures['first_line']:.3f} |",
            "",
            "The loader's quick builder makes the data of a YAML document; the careful builder"
            " finds the lines only when the first error asks for one (last row: paid once, by"
            " an invalid template only).",
            "",
            *provenance(),
            f"- load average when the run began (the machine is shared): {load_average}",
            f"- target: under {TARGET_SECONDS:g} s in total: {met}",
        ],
    )


def _load_average() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resources", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    load_average = _load_average()
    figures = measure(args.resources, args.rounds)
    print(json.dumps({"resources": args.resources, **figures}, indent=2))
    if not args.no_record:
        record(args.resources, args.rounds, figures, load_average)


if __name__ == "__main__":
    main()
