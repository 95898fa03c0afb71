# SPDX-License-Identifier: Apache-2.0
"""A real afmd for the real-client tests, serving the real scripted backend with a script the test writes.

    def test_something(gateway):
        gw = gateway(models={"m": [{"text": "Hello"}]})
        client = openai.OpenAI(base_url=gw.base_url, api_key="unused")
        ...
        gw.records()            # the scripted backend's RecordFile, parsed (docs/backend-abi.md §10.4)

The binaries come from AFM_BIN_DIR (``make test`` passes it) or ``.build/debug``: ``afmd`` and
``libafm-backend-scripted.so``, which is installed as ``scripted.so`` next to ``Plugins/scripted/scripted.json`` in
a fresh backend directory, as the Swift tests' DaemonHarness does. afmd listens on 127.0.0.1:0 and its port is read
from the log line "listening on 127.0.0.1:PORT". At the end of the test it gets SIGTERM and must exit 0.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_SECONDS = 30
# Longer than afmd's own 30 s drain limit, so a drain that runs out still shows its exit status.
STOP_TIMEOUT_SECONDS = 45
DEFAULT_CAPABILITIES = {"streaming": True, "tools": True, "vision": False, "reasoning": False}
LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+)")


# The capabilities of a scripted model that may answer in a JSON format (the dialect tests of structured output).
STRUCTURED_CAPABILITIES = {"streaming": True, "tools": True, "vision": False, "reasoning": False, "structured_output": True}

def stage_dir() -> Path:
    value = os.environ.get("AFM_STAGE_DIR", "")
    return Path(value) if value else ROOT / ".build" / "afm"


def local_model() -> Path:
    value = os.environ.get("AFM_MODEL", "")
    return Path(value) if value else ROOT / ".cache" / "afm" / "models" / "smollm2-135m-instruct-q4_1.gguf"


def bin_dir() -> Path:
    value = os.environ.get("AFM_BIN_DIR", "")
    return Path(value) if value else ROOT / ".build" / "debug"


@dataclass
class Gateway:
    """One running afmd."""

    process: subprocess.Popen
    port: int
    root: Path
    record_path: Path
    log_path: Path
    stopped: bool = field(default=False)

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (with /v1), for the SDKs."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def records(self, event: str | None = None) -> list[dict[str, Any]]:
        """The scripted backend's records so far, parsed; only those whose ``event`` matches when given."""
        if not self.record_path.exists():
            return []
        lines = self.record_path.read_text(encoding="utf-8").split("\n")
        parsed = [json.loads(line) for line in lines if line]
        return [record for record in parsed if event is None or record.get("event") == event]

    def generate_requests(self) -> list[dict[str, Any]]:
        """The generation request documents of every accepted ``generate`` call, oldest first."""
        return [record["request"] for record in self.records("generate") if record.get("accepted")]

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def stop(self) -> int:
        """SIGTERM, then wait for the exit status (SIGKILL after a timeout, which the caller reports)."""
        if self.stopped:
            return self.process.returncode
        self.stopped = True
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError(f"afmd did not exit within {STOP_TIMEOUT_SECONDS} s of SIGTERM:\n{self.log()}")
        return self.process.returncode


def model_entry(model_id: str, spec: Any) -> dict[str, Any]:
    """A script model from either a list of steps or a full model object (whose ``id`` is filled in)."""
    if isinstance(spec, list):
        return {"id": model_id, "context_tokens": 4096, "capabilities": dict(DEFAULT_CAPABILITIES), "steps": spec}
    entry = {"context_tokens": 4096, "capabilities": dict(DEFAULT_CAPABILITIES), **spec}
    entry["id"] = model_id
    return entry


def start_gateway(
    tmp_path: Path, models: dict[str, Any], config: str = "", local: bool = False, api_key: str | None = None
) -> Gateway:
    afmd = bin_dir() / "afmd"
    library = bin_dir() / "libafm-backend-scripted.so"
    for path in (afmd, library):
        if not path.exists():
            raise AssertionError(f"{path} is missing: run `make build` first (or set AFM_BIN_DIR)")

    root = tmp_path / "afmd-root"
    backends = tmp_path / "backends"
    root.mkdir(parents=True)
    backends.mkdir(parents=True)
    shutil.copyfile(library, backends / "scripted.so")
    shutil.copyfile(ROOT / "Plugins" / "scripted" / "scripted.json", backends / "scripted.json")

    if local:
        # The real local backend (llama.cpp) with the real default model, as `make test` stages and fetches them.
        for path in (stage_dir() / "backends" / "local.so", local_model()):
            if not path.exists():
                raise AssertionError(f"{path} is missing: run `make build` first (or set AFM_STAGE_DIR / AFM_MODEL)")
        shutil.copyfile(stage_dir() / "backends" / "local.so", backends / "local.so")
        shutil.copyfile(stage_dir() / "backends" / "local.json", backends / "local.json")
        config = f"[Backend.local]\nModel={local_model()}\nContextTokens=2048\n\n" + config

    record = tmp_path / "record.jsonl"
    settings = f"[Backend.scripted]\nRecordFile={record}\n"
    if models:
        script = {"script_version": 1, "models": [model_entry(key, value) for key, value in models.items()]}
        script_path = tmp_path / "script.json"
        script_path.write_text(json.dumps(script, indent=1), encoding="utf-8")
        settings += f"Script={script_path}\n"
    (root / "afmd.conf").write_text(config + "\n" + settings if local else settings + config, encoding="utf-8")
    # SIGTERM at the end of every test: no drain delay (a vendor drop-in, so a test's own setting shadows it).
    vendor = root / "usr" / "lib" / "afm" / "afmd.conf.d"
    vendor.mkdir(parents=True)
    (vendor / "00-tests.conf").write_text("[Server]\nDrainDelaySeconds=0\n", encoding="utf-8")

    def ready(gateway: Gateway) -> None:
        check_models_served(gateway, list(models), api_key)
        if local:
            wait_for_alias(gateway, "on-device")

    return launch_afmd(afmd, root, backends, record, ready)


def launch_afmd(afmd: Path, root: Path, backends: Path, record_path: Path, ready: Callable[[Gateway], None]) -> Gateway:
    """Starts ``afmd`` on 127.0.0.1:0 with ``root`` and ``backends``, reads its port from its log, then runs ``ready``;
    kills it when either fails."""
    log_path = root / "afmd.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(afmd), "--listen", "127.0.0.1:0", "--config-root", str(root), "--backend-dir", str(backends)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    gateway = Gateway(process=process, port=0, root=root, record_path=record_path, log_path=log_path)
    try:
        gateway.port = wait_for_port(gateway)
        ready(gateway)
    except BaseException:
        if process.poll() is None:
            process.kill()
            process.wait()
        raise
    return gateway


def wait_for_port(gateway: Gateway) -> int:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        match = LISTENING.search(gateway.log())
        if match:
            return int(match.group(1))
        if gateway.process.poll() is not None:
            raise AssertionError(f"afmd exited ({gateway.process.returncode}) during start:\n{gateway.log()}")
        time.sleep(0.02)
    raise AssertionError(f"afmd did not log 'listening on' within {START_TIMEOUT_SECONDS} s:\n{gateway.log()}")


def wait_for_alias(gateway: Gateway, alias: str) -> None:
    """Waits until the alias resolves (the local backend has loaded its model)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{gateway.origin}/v1/models", timeout=10) as answer:
            if any(model["id"] == alias for model in json.load(answer)["data"]):
                return
        time.sleep(0.2)
    raise AssertionError(f"'{alias}' did not become available within 120 s:\n{gateway.log()}")


def check_models_served(gateway: Gateway, model_ids: list[str], api_key: str | None = None) -> None:
    """Fails with afmd's log when the scripted backend did not load the test's script (a script error, an old build)."""
    request = urllib.request.Request(f"{gateway.origin}/v1/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    with urllib.request.urlopen(request, timeout=10) as answer:
        served = {model["id"] for model in json.load(answer)["data"]}
    missing = [model_id for model_id in model_ids if model_id not in served]
    if missing:
        errors = "\n".join(line for line in gateway.log().splitlines() if " error " in line) or gateway.log()
        raise AssertionError(f"afmd does not serve the scripted models {missing}; its log:\n{errors}")


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Callable[..., Gateway]]:
    """``gateway(models={id: steps-or-model}, config="", local=False, api_key=None)`` starts afmd (with ``local`` also
    the real local backend and model, as ``on-device``; ``api_key``: one of the keys its config's APIKeyFile holds,
    for the start-up check); after the test it is stopped and must exit 0."""
    started: list[Gateway] = []

    def start(models: dict[str, Any] | None = None, config: str = "", local: bool = False, api_key: str | None = None) -> Gateway:
        gw = start_gateway(tmp_path / f"gw{len(started)}", models or {}, config, local, api_key)
        started.append(gw)
        return gw

    yield start
    failures = []
    for gw in started:
        try:
            status = gw.stop()
        except AssertionError as error:
            failures.append(str(error))
            continue
        if status != 0:
            failures.append(f"afmd exited {status} after SIGTERM (expected 0):\n{gw.log()}")
    assert not failures, "\n".join(failures)



# ---------------------------------------------------------------------------------------------------------------
# A real afmd serving the real local backend (llama.cpp) with a real model, for tests of what a model does.
# ---------------------------------------------------------------------------------------------------------------

MODELS = {
    "smollm2": ROOT / ".cache" / "afm" / "models" / "smollm2-135m-instruct-q4_1.gguf",
    "gemma3": ROOT / ".cache" / "afm" / "models" / "gemma-3-270m-q4_k_m.gguf",
}


def start_local_gateway(tmp_path: Path, model: Path, context_tokens: int = 2048) -> Gateway:
    """afmd with ``local.so`` (staged by ``make build``) serving ``model`` as ``on-device``."""
    afmd = bin_dir() / "afmd"
    library = stage_dir() / "backends" / "local.so"
    for path in (afmd, library, model):
        if not path.exists():
            raise AssertionError(f"{path} is missing: run `make build` (and scripts/fetch-model) first")
    root = tmp_path / "afmd-root"
    backends = tmp_path / "backends"
    root.mkdir(parents=True)
    backends.mkdir(parents=True)
    (backends / "local.so").symlink_to(library)
    shutil.copyfile(stage_dir() / "backends" / "local.json", backends / "local.json")
    # A model on two shared cores can take minutes for a long answer: the processing deadline (300 s) must not
    # cut a non-streaming structured answer off.
    config = f"[Server]\nProcessingDeadlineSeconds=1800\n[Backend.local]\nModel={model}\nContextTokens={context_tokens}\n"
    (root / "afmd.conf").write_text(config, encoding="utf-8")

    def ready(gateway: Gateway) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the model loads after the listener opens
            with urllib.request.urlopen(f"{gateway.origin}/v1/models", timeout=10) as answer:
                if any(m.get("capabilities", {}).get("structured_output") for m in json.load(answer)["data"]):
                    return
            time.sleep(0.2)
        raise AssertionError(f"the local backend did not serve a model within 120 s:\n{gateway.log()}")

    return launch_afmd(afmd, root, backends, tmp_path / "none.jsonl", ready)


@pytest.fixture(scope="module", params=sorted(MODELS))
def local_gateway(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """One afmd per real model (SmolLM2-135M, Gemma 3 270M) for the module's tests; must exit 0 on SIGTERM."""
    gw = start_local_gateway(tmp_path_factory.mktemp(request.param), MODELS[request.param])
    yield gw
    status = gw.stop()
    assert status == 0, f"afmd exited {status} after SIGTERM:\n{gw.log()}"
