"""Regenerate docs/dashboard-tools.png: a demo registry (the example tools, a week of
synthetic calls, one tool OODA disabled) served on 127.0.0.1 and photographed by
headless Chromium (Debian's chromium and chromium-driver)."""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

import tooldb
from tooldb.server import ServerConfig, create_app
from tooldb.settings import Settings

TARGET = Path(__file__).resolve().parent.parent / "docs" / "dashboard-tools.png"
DAY = 86_400.0


def demo(registry: tooldb.Registry) -> None:
    registry.add_module("tooldb.examples.basic")
    geocode = {"name": "geocode_city", "description": "Look a city up (a flaky service)."}
    registry.add(
        {**geocode, "category": "places", "kind": "http", "target": "GET http://127.0.0.1:9/"}
    )
    rng = np.random.default_rng(3)
    now = time.time()
    rows = []
    for tool in registry.list():
        calls = 260 if tool.name == "geocode_city" else int(rng.integers(40, 400))
        success = 0.25 if tool.name == "geocode_city" else float(rng.uniform(0.85, 1.0))
        typical = float(rng.lognormal(1.5, 1.0))
        for at in np.sort(now - rng.random(calls) * 6.5 * DAY):
            ok = bool(rng.random() < success)
            rows.append({
                "tenant": registry.tenant, "tool_id": tool.id, "tool_name": tool.name,
                "tool_version": tool.version, "run_id": None, "session_id": "demo",
                "arguments": {}, "success": ok, "error_kind": None if ok else "execution",
                "error": None if ok else "demo", "output_size": 0, "output_preview": None,
                "duration_ms": float(rng.lognormal(np.log(typical), 0.5)),
                "started_at": float(at),
            })  # fmt: skip
    registry.store.record_calls(sorted(rows, key=lambda r: r["started_at"]))
    registry.ooda()


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/demo.db"
        registry = tooldb.open(url, settings=Settings(embedder="hash", url=url))
        demo(registry)
        server = uvicorn.Server(uvicorn.Config(
            create_app(registry, ServerConfig(no_auth=True)), host="127.0.0.1", port=8765,
            log_level="warning"))  # fmt: skip
        threading.Thread(target=server.run, daemon=True).start()
        while not server.started:
            time.sleep(0.05)
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for argument in ("--headless=new", "--no-sandbox", "--window-size=1280,640"):
            options.add_argument(argument)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            driver.get("http://127.0.0.1:8765/")
            driver.save_screenshot(str(TARGET))
        finally:
            driver.quit()
            server.should_exit = True
            registry.close()
    print(f"wrote {TARGET}", file=sys.stderr)


if __name__ == "__main__":
    main()
