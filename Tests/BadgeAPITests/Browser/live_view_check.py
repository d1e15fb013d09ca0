#!/usr/bin/env python3
"""Drives headless Chromium through the DevTools protocol: opens RedDot's live view, waits until
its stream is live, publishes one event over HTTP, and measures how long the page takes to show
the new badge. Prints one JSON line; exits 0 when the badge appeared within the limit.

Usage: live_view_check.py PAGE_URL EVENTS_URL ADMIN_TOKEN EVENT_JSON NODE_PATH BADGE_TEXT [SCREENSHOT]
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket  # Debian: python3-websocket

LIMIT_SECONDS = 2.0


def fail(message, **extra):
    print(json.dumps({"ok": False, "error": message, **extra}))
    sys.exit(1)


def main():
    page_url, events_url, admin_token, event_json, node_path, badge_text = sys.argv[1:7]
    screenshot = sys.argv[7] if len(sys.argv) > 7 else None
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if not binary:
        fail("chromium is not installed (apt-get install chromium)")
    profile = tempfile.mkdtemp(prefix="reddot-chromium-")
    browser = subprocess.Popen(
        [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        deadline = time.time() + 30
        while time.time() < deadline and port is None:
            line = browser.stderr.readline()
            if not line and browser.poll() is not None:
                fail("chromium exited", code=browser.returncode)
            if "DevTools listening on ws://" in line:
                port = int(line.split("ws://")[1].split("/")[0].split(":")[1])
        if port is None:
            fail("chromium did not open its DevTools port")
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = next(t for t in targets if t.get("type") == "page")
        ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=10)
        counter = [0]

        def call(method, **params):
            counter[0] += 1
            ws.send(json.dumps({"id": counter[0], "method": method, "params": params}))
            while True:
                message = json.loads(ws.recv())
                if message.get("id") == counter[0]:
                    if "error" in message:
                        fail(f"{method} failed", detail=message["error"])
                    return message.get("result", {})

        def evaluate(expression):
            result = call("Runtime.evaluate", expression=expression, returnByValue=True)
            return result.get("result", {}).get("value")

        call("Page.enable")
        call("Page.navigate", url=page_url)
        deadline = time.time() + 20
        while evaluate("document.getElementById('status') && document.getElementById('status').dataset.state") != "live":
            if time.time() > deadline:
                fail("the live view did not go live", status=evaluate("document.getElementById('status') && document.getElementById('status').textContent"))
            time.sleep(0.05)
        query = f"(function(){{var n=document.querySelector('[data-path=\"{node_path}\"] > .row > .badge');return n?n.dataset.badge:null}})()"
        before = evaluate(query)
        if before == badge_text:
            fail("the badge was there before the event", before=before)

        request = urllib.request.Request(
            events_url, data=event_json.encode(), method="POST",
            headers={"Authorization": f"Bearer {admin_token}", "Content-Type": "application/json"})
        published = time.time()
        with urllib.request.urlopen(request, timeout=10) as response:
            if response.status != 202:
                fail("publishing failed", status=response.status)
        while True:
            seen = evaluate(query)
            elapsed = time.time() - published
            if seen == badge_text:
                break
            if elapsed > LIMIT_SECONDS + 3:
                fail("the badge did not appear", seen=seen, waited_seconds=round(elapsed, 3))
            time.sleep(0.02)
        if screenshot:
            shot = call("Page.captureScreenshot", format="png")
            with open(screenshot, "wb") as handle:
                handle.write(base64.b64decode(shot["data"]))
        print(json.dumps({"ok": elapsed <= LIMIT_SECONDS, "seen_after_ms": round(elapsed * 1000), "badge": seen}))
        sys.exit(0 if elapsed <= LIMIT_SECONDS else 1)
    finally:
        browser.kill()
        browser.wait()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
