"""The console in a real headless Chromium on an archived room: its history steps and verifies from the archive, and
(an idle room) the next move brings it back through the real engine process."""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
from pathlib import Path

import httpx
import redis
import redis.asyncio as aioredis
from gateway_stack import Stack
from test_console_browser import (  # noqa: F401 - the console test's fixtures: one gateway process, one Chromium
    auditor,
    base_url,
    board_room_played,
    board_rules,
    board_state,
    browser,
    page,
    placed_cells,
    pytestmark,
    shots,
    sign_in_as_auditor,
)

from almanac.storage.archive import ArchiveStore, ArchivingStore, archive_room, default_archive_url
from almanac.storage.keys import Keys


def archived_as_idle(stack: Stack, room: str) -> str:
    """Move ``room`` to the stack's archive (the data directory's, as every process of the stack reads it) as the
    archiver does a room idle past ALMANAC_ARCHIVE_IDLE_AFTER; its status."""

    async def move() -> str:
        client = aioredis.Redis.from_url(stack.redis_url)
        try:
            store = ArchivingStore(client, ArchiveStore(default_archive_url(str(stack.data_dir))), 16)
            return (await archive_room(store, room, reason="idle")).status
        finally:
            await client.aclose()

    with concurrent.futures.ThreadPoolExecutor(1) as thread:  # Playwright's sync API holds this thread's loop
        return thread.submit(asyncio.run, move()).result()


def test_an_archived_rooms_history_steps_and_verifies_and_its_next_move_brings_it_back(
        page, base_url: str, auditor: str, stack: Stack, shots: Path) -> None:  # noqa: F811 - fixtures
    # Given a board room with four placements, projected, then moved to the archive (idle)
    room, token = board_room_played(base_url, auditor, f"arch-{secrets.token_hex(2)}", moves=4)
    keys, sync = Keys(16), redis.Redis.from_url(stack.redis_url)
    version = int(sync.get(keys.version(room)))
    with httpx.Client(base_url=base_url, timeout=15) as http:
        assert http.get(f"/rooms/{room}/events", headers={"Authorization": f"Bearer {auditor}"}).status_code == 200
        for _ in range(100):
            if http.get(f"/rooms/{room}").json().get("version") == version:
                break
            page.wait_for_timeout(100)
    assert archived_as_idle(stack, room) == "archived"
    assert not sync.exists(keys.events(room)) and sync.hexists(keys.pointer_bucket(room), room)

    # When the auditor opens it in the console and steps through its history from version 1, one version at a time
    page.goto(f"/#/room/{room}")
    sign_in_as_auditor(page, auditor)
    page.locator(f'[data-loaded="{version}|"]').wait_for()
    placed_at_latest = placed_cells(page)
    slider = page.get_by_role("slider", name="Version")
    slider.focus()
    slider.press("Home")
    page.locator('[data-loaded="1|"]').wait_for()
    seen = []
    for step in range(2, version + 1):
        slider.press("ArrowRight")
        page.locator(f'[data-loaded="{step}|"]').wait_for()
        seen.append(placed_cells(page))
        if step == version // 2 + 1:
            page.screenshot(path=shots / "30-archived-room-midway.png", full_page=True)
    # Then each step shows the board of that version (placements only grow, to what the latest has)
    assert seen == sorted(seen) and seen[-1] == placed_at_latest >= 4
    assert page.get_by_test_id("latest").inner_text() == str(version)
    # and verify passes, read from the archive
    page.get_by_role("button", name="Verify").click()
    result = page.get_by_test_id("verify-result")
    result.wait_for()
    assert "verified" in result.inner_text(), result.inner_text()
    page.screenshot(path=shots / "31-archived-room-verified.png", full_page=True)
    assert sync.hexists(keys.pointer_bucket(room), room)  # reading it did not bring it back

    # When its player makes the next move, the engine process brings the room back before deciding it
    state = board_state(base_url, auditor, room)
    move = board_rules.legal_placements(state.board, board_rules.current_element(state))[0]
    answer = httpx.post(f"{base_url}/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"},
                        json={"command": {"kind": "place_element", "row": move.row, "column": move.column,
                                          "rotation": move.rotation, "mirror": move.mirror}}, timeout=15)
    assert answer.status_code == 200, answer.text
    assert answer.json()["first_version"] == version + 1
    latest = int(sync.get(keys.version(room)))
    assert not sync.hexists(keys.pointer_bucket(room), room) and sync.xlen(keys.events(room)) == latest > version
    # and the console shows the new version, the history still whole
    page.reload()
    page.locator(f'[data-loaded="{latest}|"]').wait_for()
    assert placed_cells(page) > placed_at_latest
    page.screenshot(path=shots / "32-archived-room-back.png", full_page=True)
    sync.close()
