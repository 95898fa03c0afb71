# SPDX-License-Identifier: Apache-2.0
"""Two hosts of the AFM bridge for the tests: over stdio (``afm bridge`` as a subprocess) and in-process over the C
ABI (``libafm-bridge.so`` through ctypes). Both speak the same JSON-RPC 2.0 (docs/bridge.md) through one interface:

    host = StdioHost(url, model)            # or CtypesHost(url, model)
    result = host.call("agent.create", {...})
    answer = host.request("agent.run", {...})    # the whole response: {"id", "result"} or {"id", "error"}
    event = host.wait_event(run_id, "tool_call_requested")
    host.close()
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

TIMEOUT_SECONDS = 60


class BridgeHost:
    """What both transports share: matching responses to requests, collecting ``run.event`` notifications."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._responses: dict[Any, dict[str, Any]] = {}
        self.notifications: list[dict[str, Any]] = []
        # Every message in the order the bridge delivered it.
        self.messages: list[dict[str, Any]] = []
        self._next_id = 0

    # Transport --------------------------------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _received(self, line: bytes) -> None:
        message = json.loads(line)
        with self._lock:
            self.messages.append(message)
            if "id" in message and ("result" in message or "error" in message):
                self._responses.setdefault(json.dumps(message["id"]), message)
            else:
                self.notifications.append(message)
            self._lock.notify_all()

    # Requests ---------------------------------------------------------------------------------------------------
    def send(self, method: str, params: dict[str, Any] | None = None, request_id: Any = None) -> Any:
        """Sends a request; returns its id."""
        if request_id is None:
            self._next_id += 1
            request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send_raw(json.dumps(message).encode())
        return request_id

    def response(self, request_id: Any, timeout: float = TIMEOUT_SECONDS) -> dict[str, Any]:
        key = json.dumps(request_id)
        with self._lock:
            if not self._lock.wait_for(lambda: key in self._responses, timeout):
                raise AssertionError(f"no answer to request {request_id} within {timeout} s; messages: {self.messages[-5:]}")
            return self._responses.pop(key)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.response(self.send(method, params))

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        answer = self.request(method, params)
        assert "result" in answer, f"{method} failed: {answer}"
        return answer["result"]

    # Events -----------------------------------------------------------------------------------------------------
    def events(self, run_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return [n["params"]["event"] for n in self.notifications if n.get("method") == "run.event" and n["params"]["run_id"] == run_id]

    def wait_event(self, run_id: str, event_type: str, timeout: float = TIMEOUT_SECONDS) -> dict[str, Any]:
        def find() -> dict[str, Any] | None:
            for notification in self.notifications:
                params = notification.get("params", {})
                if notification.get("method") == "run.event" and params.get("run_id") == run_id and params["event"]["type"] == event_type:
                    return params["event"]
            return None

        with self._lock:
            if not self._lock.wait_for(lambda: find() is not None, timeout):
                raise AssertionError(f"run {run_id} sent no {event_type} event within {timeout} s; its events: {self.events(run_id)}")
            found = find()
            assert found is not None
            return found

    def wait_end(self, run_id: str, timeout: float = TIMEOUT_SECONDS) -> dict[str, Any]:
        """The run's last event (``completed`` or ``failed``)."""
        def last() -> dict[str, Any] | None:
            for event in self.events(run_id):
                if event["type"] in ("completed", "failed"):
                    return event
            return None

        with self._lock:
            if not self._lock.wait_for(lambda: last() is not None, timeout):
                raise AssertionError(f"run {run_id} did not end within {timeout} s; its events: {self.events(run_id)}")
            found = last()
            assert found is not None
            return found


class StdioHost(BridgeHost):
    """``afm bridge`` as a child process: one message per line on its stdin and stdout; its stderr is kept."""

    def __init__(self, afm: Path, url: str, model: str, log_path: Path, extra_args: list[str] | None = None) -> None:
        super().__init__()
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [str(afm), "bridge", "--url", url, "--model", model, *(extra_args or [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip():
                self._received(line)

    def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def close(self) -> int:
        """Closes stdin (the host leaves) and returns the bridge's exit status."""
        if self.process.stdin and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            status = self.process.wait(timeout=TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"afm bridge did not exit after its stdin closed:\n{self.log()}")
        self._reader.join(timeout=10)
        self._log.close()
        return status


CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64)


def load_library(path: Path) -> ctypes.CDLL:
    library = ctypes.CDLL(str(path))
    library.afm_bridge_open.argtypes = [ctypes.c_char_p, CALLBACK, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_uint64]
    library.afm_bridge_open.restype = ctypes.c_int32
    library.afm_bridge_send.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64]
    library.afm_bridge_send.restype = ctypes.c_int32
    library.afm_bridge_close.argtypes = [ctypes.c_void_p]
    library.afm_bridge_close.restype = ctypes.c_int32
    library.afm_bridge_version.argtypes = []
    library.afm_bridge_version.restype = ctypes.c_char_p
    return library


class CtypesHost(BridgeHost):
    """``libafm-bridge.so`` in this process: ``afm_bridge_open`` with a Python callback, ``afm_bridge_send``,
    ``afm_bridge_close``."""

    def __init__(self, library: ctypes.CDLL, url: str, model: str) -> None:
        super().__init__()
        self.library = library
        self.callback_threads: set[int] = set()
        # Kept referenced: ctypes frees the C thunk when the Python object goes.
        self._callback = CALLBACK(self._deliver)
        handle = ctypes.c_void_p()
        error = ctypes.create_string_buffer(512)
        config = json.dumps({"url": url, "model": model}).encode()
        status = library.afm_bridge_open(config, self._callback, None, ctypes.byref(handle), error, len(error))
        assert status == 0, f"afm_bridge_open returned {status}: {error.value.decode()}"
        self.handle = handle

    def _deliver(self, _user: Any, message: bytes, size: int) -> None:
        assert len(message) == size
        self.callback_threads.add(threading.get_ident())
        self._received(message)

    def send_raw(self, data: bytes) -> None:
        status = self.library.afm_bridge_send(self.handle, data, len(data))
        assert status == 0, f"afm_bridge_send returned {status}"

    def close(self) -> int:
        status = self.library.afm_bridge_close(self.handle)
        self.handle = None
        return status


def wait_until(condition, timeout: float = TIMEOUT_SECONDS, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def bridge_library(bin_dir: Path) -> Path:
    path = bin_dir / "libafm-bridge.so"
    if not path.exists():
        raise AssertionError(f"{path} is missing: run `make build` first (or set AFM_BIN_DIR)")
    return path


def afm_binary(bin_dir: Path) -> Path:
    path = bin_dir / "afm"
    if not path.exists():
        raise AssertionError(f"{path} is missing: run `make build` first (or set AFM_BIN_DIR)")
    return path

