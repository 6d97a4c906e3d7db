"""`openstack stack create/list/show/delete` (python-openstackclient with heatclient's
plugin) against the REST server, authenticated by the token_endpoint auth type."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.rest_server import rest_server

OPENSTACK = Path(sys.executable).with_name("openstack")

TEMPLATE = """
heat_template_version: 2016-10-14
parameters:
  word: {type: string}
resources:
  a: {type: OS::Heat::Value, properties: {value: {get_param: word}}}
outputs:
  said: {value: {get_attr: [a, value]}}
"""


def test_openstack_stack_create_list_show_delete(tmp_path: Path) -> None:
    if not OPENSTACK.exists() and shutil.which("openstack") is None:
        pytest.skip("python-openstackclient is not installed (pip install -e '.[dev]')")
    template = tmp_path / "stack.yaml"
    template.write_text(TEMPLATE)
    with rest_server(tmp_path / "state.db") as server:
        environment = {
            **os.environ,
            "OS_AUTH_TYPE": "token_endpoint",
            "OS_ENDPOINT": server.endpoint("alpha"),
            "OS_TOKEN": server.token("alpha"),
        }

        # One openstack process runs every command (its interactive mode reads them from
        # stdin): its start-up takes seconds, the commands themselves do not.
        commands = [
            f"stack create -t {template} --parameter word=hi --wait web -f value -c id",
            "stack list -f json",
            "stack show web -f json -c outputs -c parameters",
            "stack delete --yes --wait web",
            "stack list -f json",
        ]
        done = subprocess.run(
            [str(OPENSTACK)],
            input="\n".join(commands) + "\n",
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )
        # The interactive mode exits 1 at the end of its input whatever happened: a
        # failed command shows as an error message, and as a document missing below.
        assert "ERROR" not in done.stdout + done.stderr, done.stdout + done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        documents = _json_documents(done.stdout)
        listed, shown, after_delete = documents
        assert [(s["Stack Name"], s["Stack Status"]) for s in listed] == [
            ("web", "CREATE_COMPLETE")
        ]
        assert shown["outputs"][0]["output_value"] == "hi"
        assert shown["parameters"]["word"] == "hi"
        assert after_delete == []


def _json_documents(text: str) -> list[object]:
    """The JSON documents in the interactive session's output, in order (a document starts
    a line; event lines such as ``… [web]: CREATE_COMPLETE`` are not documents)."""
    decoder = json.JSONDecoder()
    found: list[object] = []
    index = 0
    while index < len(text):
        at_line_start = index == 0 or text[index - 1] == "\n"
        if at_line_start and text[index] in "[{":
            try:
                document, index = decoder.raw_decode(text, index)
            except json.JSONDecodeError:
                index += 1
                continue
            found.append(document)
        else:
            index += 1
    return found
