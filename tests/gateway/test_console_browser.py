"""The console in a real headless Chromium against a real stack: play, time travel, verify, audit, tamper."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from game_modules import game_module
from gateway_stack import Stack
from store_forgery import rewrite_in_redis

from almanac.client.signing import PlayerKey, nonce_commitment, recorded_command_id
from almanac.events import registry
from almanac.events.signing import command_bytes, join_bytes, signature_valid
from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR, TokenSigner

board_rules = game_module("board@1", "rules")
BoardState = game_module("board@1", "state").BoardState
MOUNTAIN = game_module("board@1", "data").MOUNTAIN

CHROMIUM = shutil.which("chromium")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.lasts(87),  # seconds of one worker in a whole run: sent to the workers early (tests/conftest.py)
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)"),
]
SECRET = "console-browser-test-secret-" + "x" * 16  # HS256 keys are at least 32 bytes
TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def base_url(stack: Stack) -> str:
    """The gateway as its own process (uvicorn), as `almanac up` runs it."""
    return stack.start_gateway(ALMANAC_SECRET=SECRET)


@pytest.fixture(scope="module")
def auditor() -> str:
    return TokenSigner(SECRET, 3600).issue(ANY_ROOM, "auditor", ROLE_AUDITOR)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("ALMANAC_SCREENSHOTS") or tmp_path_factory.mktemp("console-screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nconsole screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser, base_url: str, auditor: str):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, base_url=base_url)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert not errors, errors


def sign_in_as_auditor(page, auditor: str) -> None:
    token = page.get_by_label("auditor token")
    token.fill(auditor)
    token.press("Enter")
    token.blur()


def board_state(base_url: str, auditor: str, room: str) -> BoardState:
    answer = httpx.get(f"{base_url}/rooms/{room}/state", headers={"Authorization": f"Bearer {auditor}"})
    return msgspec.convert(answer.json()["state"]["game"], BoardState)


def board_room_played(base_url: str, auditor: str, player: str, moves: int) -> tuple[str, str]:
    """A board room ``player`` created over HTTP and played ``moves`` legal placements in: (room, token)."""
    with httpx.Client(base_url=base_url, timeout=15) as http:
        created = http.post("/rooms", json={"ruleset": "board", "player": player})
        room, token = created.json()["room"], created.json()["token"]
        for _ in range(moves):
            state = board_state(base_url, auditor, room)
            move = board_rules.legal_placements(state.board, board_rules.current_element(state))[0]
            command = {"kind": "place_element", "row": move.row, "column": move.column,
                       "rotation": move.rotation, "mirror": move.mirror}
            assert http.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"},
                             json={"command": command}).status_code == 200
    return room, token


def realm_trade_played(base_url: str, **create: object) -> tuple[str, str, dict[str, str]]:
    """A realm room where alice's merchant trades with bob over HTTP (the scripted trade of the game tests):
    (room, trade id, {player: token}), the players' ids made unique; ``create``: more of the create request."""
    suffix = secrets.token_hex(3)
    alice, bob = f"alice-{suffix}", f"bob-{suffix}"
    with httpx.Client(base_url=base_url, timeout=15) as http:
        created = http.post("/rooms", json={"ruleset": "realm", "player": alice, "options": {"players": [alice, bob]},
                                            **create})
        assert created.status_code == 201, created.text
        room, tokens = created.json()["room"], {alice: created.json()["token"]}
        tokens[bob] = http.post(f"/rooms/{room}/join", json={"player": bob}).json()["token"]

        def play(who: str, command: dict) -> dict:
            answer = http.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {tokens[who]}"},
                               json={"command": command})
            assert answer.status_code == 200, answer.text
            return answer.json()

        sent = play(alice, {"kind": "send_merchant", "to": bob, "load": {"food": 6000, "gold": 2000}})
        trade = f"trade-{sent['first_version']}"
        play(alice, {"kind": "offer_trade", "trade_id": trade, "buy": "wood", "pay": "food", "dice": 1})
        play(bob, {"kind": "counter_offer", "trade_id": trade, "want": "gold"})
        play(alice, {"kind": "agree_trade", "trade_id": trade})
        play(bob, {"kind": "agree_trade", "trade_id": trade})
    return room, trade, tokens


def placed_cells(page) -> int:
    return page.locator("[data-testid=board] .cell:not(.t-empty):not(.t-mountain)").count()


def test_play_a_board_room_travel_back_and_verify(page, base_url: str, auditor: str, shots: Path) -> None:
    # Given the console with an auditor token entered once
    page.goto("/")
    sign_in_as_auditor(page, auditor)
    page.get_by_role("region", name="System").get_by_text("shards leased").wait_for()
    page.screenshot(path=shots / "01-rooms.png", full_page=True)

    # When a person creates a board room through the form
    page.locator("#create-ruleset").select_option("board")
    player = f"ana-{secrets.token_hex(2)}"
    page.locator("#create-player").fill(player)
    page.get_by_role("button", name="Create room").click()
    page.get_by_test_id("seat").wait_for()
    assert page.get_by_test_id("seat").inner_text() == player
    room = page.get_by_test_id("room-id").inner_text()

    # and plays three legal moves through the form generated from the command schema
    for move in range(3):
        state = board_state(base_url, auditor, room)
        legal = board_rules.legal_placements(state.board, board_rules.current_element(state))[0]
        before = int(page.get_by_test_id("latest").inner_text())
        page.locator("#command-kind").select_option("place_element")
        page.locator("#cmd-row").fill(str(legal.row))
        page.locator("#cmd-column").fill(str(legal.column))
        page.locator("#cmd-rotation").fill(str(legal.rotation))
        page.locator("#cmd-mirror").set_checked(legal.mirror)
        page.get_by_role("button", name="Send command").click()
        page.get_by_test_id("accepted").wait_for()
        page.wait_for_function(f"Number(document.querySelector('[data-testid=latest]').innerText) > {before}")
        page.wait_for_function(
            "document.querySelector('[data-testid=version]').innerText === "
            "document.querySelector('[data-testid=latest]').innerText")
        page.screenshot(path=shots / f"02-move-{move + 1}.png", full_page=True)
    page.wait_for_function(f"document.querySelectorAll('[data-testid=board] .cell.t-empty').length < {121 - 5 - 3}")
    # The browser registered an Ed25519 key at the creator's join and signed each move (WebCrypto, docs/dice.md)
    report = httpx.get(f"{base_url}/rooms/{room}/verification", headers={"Authorization": f"Bearer {auditor}"}).json()
    assert report["ok"] and report["signing_players"] == [player] and report["commands_signed"] >= 3, report
    assert report["signed_joins"] == [player], report  # the join itself, signed by the key it registered
    placed_now = placed_cells(page)
    assert placed_now >= 3
    diff_at_latest = page.get_by_test_id("diff").inner_text()

    # Then an illegal move (onto the mountain or a placed element) is refused inline, with its reason
    state = board_state(base_url, auditor, room)
    element = board_rules.current_element(state)
    illegal = next(p for p, cells in board_rules.in_map_placements(element) if not board_rules.is_free(state.board, cells))
    page.locator("#cmd-row").fill(str(illegal.row))
    page.locator("#cmd-column").fill(str(illegal.column))
    page.locator("#cmd-rotation").fill(str(illegal.rotation))
    page.locator("#cmd-mirror").set_checked(illegal.mirror)
    page.get_by_role("button", name="Send command").click()
    refusal = page.get_by_test_id("refusal").get_by_role("alert")
    refusal.wait_for()
    assert "occupied" in refusal.inner_text() or "free" in refusal.inner_text() or ":" in refusal.inner_text()
    page.screenshot(path=shots / "03-refused.png", full_page=True)
    # and the refusal is the player's own: the browser signed it over the version it saw (the v2 form), so it
    # stands at that version only
    report = httpx.get(f"{base_url}/rooms/{room}/verification", headers={"Authorization": f"Bearer {auditor}"}).json()
    assert report["ok"] and report["refusals_rechecked"] == report["refusals_signed"] == 1, report

    # When the slider goes back to version 2 by keyboard (Home, then one step right)
    slider = page.get_by_role("slider", name="Version")
    slider.focus()
    slider.press("Home")
    page.wait_for_function("document.querySelector('[data-testid=version]').innerText === '1'")
    slider.press("ArrowRight")
    page.wait_for_function("document.querySelector('[data-testid=version]').innerText === '2'")
    page.locator('[data-loaded="2|"]').wait_for()
    # Then the board is back to its empty map with the mountains, and the diff is another one
    page.wait_for_function("document.querySelectorAll('[data-testid=board] .cell.t-mountain').length === 5 && "
                           "document.querySelectorAll('[data-testid=board] .cell.t-empty').length === 116")
    assert placed_cells(page) == 0
    assert page.get_by_test_id("diff").inner_text() != diff_at_latest
    page.screenshot(path=shots / "04-version-2.png", full_page=True)

    # And the step button moves one version, highlighting the cells that version filled
    audited = httpx.get(f"{base_url}/rooms/{room}/events", headers={"Authorization": f"Bearer {auditor}"}).json()
    first_placement = next(e["version"] for e in audited["events"] if e["type"] == "board.element_placed")
    slider.fill(str(first_placement))
    page.locator(f'[data-loaded="{first_placement}|"]').wait_for()
    assert page.locator("[data-testid=board] .cell.changed").count() > 0
    page.screenshot(path=shots / "05-first-placement-diff.png", full_page=True)

    # When the view switches to the player's: what they saw (no deck order), at that version
    page.locator("#viewer").select_option(player)
    page.locator(f'[data-loaded="{first_placement}|{player}"]').wait_for()
    tree = page.locator(".tree").inner_text()
    assert "current_element" in tree and "deck" not in tree.replace("current_element", "")
    page.screenshot(path=shots / "06-player-view.png", full_page=True)

    # Then verify passes
    page.get_by_role("button", name="Verify").click()
    result = page.get_by_test_id("verify-result")
    result.wait_for()
    assert "verified" in result.inner_text()
    # in words with their spaces: htm drops a line break's whitespace between a text and what follows
    assert re.search(r"chain \d+, \d+ commands re-decided", result.inner_text()), result.inner_text()
    page.screenshot(path=shots / "07-verified.png", full_page=True)

    # When the auditor compares the latest version with version 2 (any two versions, not only neighbours)
    page.locator("#viewer").select_option("")
    page.get_by_role("button", name="latest version", exact=True).click()
    latest = page.get_by_test_id("latest").inner_text()
    page.locator(f'[data-loaded="{latest}|"]').wait_for()
    neighbour_diff = page.get_by_test_id("diff").inner_text()
    base = page.get_by_label("compare with version")
    base.fill("2")
    base.press("Enter")
    page.wait_for_function("document.querySelector('[data-testid=diff-base]').innerText === '2'")
    # Then every cell placed since version 2 is highlighted, and the diff lists more than one version's change
    page.wait_for_function(f"document.querySelectorAll('[data-testid=board] .cell.changed').length === {placed_now}")
    two_version_diff = page.get_by_test_id("diff").inner_text()
    assert two_version_diff != neighbour_diff and len(two_version_diff.splitlines()) > len(neighbour_diff.splitlines())
    page.screenshot(path=shots / "07b-diff-latest-vs-2.png", full_page=True)
    # And going back to the previous version restores the neighbour diff
    page.get_by_role("button", name="compare with the previous version").click()
    page.wait_for_function(f"document.querySelector('[data-testid=diff-base]').innerText === '{int(latest) - 1}'")


def test_the_create_form_offers_each_default_and_its_opt_in_variant_by_its_full_name(page, base_url: str,
                                                                                      shots: Path) -> None:
    # Given the console's create form
    page.goto("/")
    page.locator("#create-ruleset option[value='realm@2']").wait_for(state="attached")

    # Then a bare rule-set is offered as its default version, and realm@2 only as an opt-in variant
    choices = page.locator("#create-ruleset option").all_inner_texts()
    assert "realm (realm@1)" in choices and "realm@2 (opt-in variant)" in choices, choices

    # When a person creates the variant
    page.locator("#create-ruleset").select_option("realm@2")
    page.locator("#create-player").fill(f"vera-{secrets.token_hex(2)}")
    page.get_by_role("button", name="Create room").click()
    page.get_by_test_id("seat").wait_for()
    page.get_by_label("realm cities").wait_for()  # drawn by the picture of its own version
    assert page.get_by_test_id("key-substituted").count() == 0  # the creator's join registered the key it sent
    page.screenshot(path=shots / "14-variant-room.png", full_page=True)

    # Then the room is decided by realm@2, as it asked
    room = page.get_by_test_id("room-id").inner_text()
    assert httpx.get(f"{base_url}/rooms/{room}").json()["ruleset_version"] == 2


def test_charts_show_public_scores_without_any_token(page, base_url: str, auditor: str, shots: Path) -> None:
    # Given a board room with one placement
    player = f"pub-{secrets.token_hex(2)}"
    with httpx.Client(base_url=base_url, timeout=15) as http:
        created = http.post("/rooms", json={"ruleset": "board", "player": player})
        room, token = created.json()["room"], created.json()["token"]
        state = board_state(base_url, auditor, room)
        move = board_rules.legal_placements(state.board, board_rules.current_element(state))[0]
        command = {"kind": "place_element", "row": move.row, "column": move.column,
                   "rotation": move.rotation, "mirror": move.mirror}
        assert http.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"},
                         json={"command": command}).status_code == 200
        # The public series has scores and nothing else; a token from another room is still refused
        public = http.get(f"/rooms/{room}/series").json()
        assert player in public["scores"] and public["resources"] == {}
    # When a visitor with no token opens the room
    page.goto(f"/#/room/{room}")
    charts = page.get_by_role("region", name="Charts")
    charts.wait_for()
    # Then the scores chart is drawn, with the player's line
    charts.locator(".u-legend").get_by_text(player).wait_for()
    assert charts.locator("canvas").count() >= 1
    page.screenshot(path=shots / "11-public-chart.png", full_page=True)


def test_realm_trade_story_step_by_step(page, base_url: str, auditor: str, shots: Path) -> None:
    # Given a realm room where alice's merchant trades with bob (the scripted trade of the game tests)
    room, trade, tokens = realm_trade_played(base_url)
    alice, bob = tokens

    # When the auditor opens the room and steps through the trade's story
    page.goto(f"/#/room/{room}")
    sign_in_as_auditor(page, auditor)
    story = page.get_by_role("region", name="Trade story")
    story.get_by_test_id("story-step").wait_for()
    assert story.get_by_test_id("story-step").inner_text().startswith("step 1 of")
    texts = [story.get_by_test_id("story-text").inner_text()]
    page.screenshot(path=shots / "08-realm-story-1.png", full_page=True)
    while story.get_by_role("button", name="next step ▶").is_enabled():
        story.get_by_role("button", name="next step ▶").click()
        texts.append(story.get_by_test_id("story-text").inner_text())
        if story.locator(".die").count():
            page.screenshot(path=shots / "09-realm-story-dice.png", full_page=True)
    # Then every step was told as the log tells it (the room's audit view of the trade), in order: the merchant
    # sent, the offer, the counter-offer, both agreements, then the rolls; and the roll shows its dice faces
    told = httpx.get(f"{base_url}/rooms/{room}/audit/trade/{trade}", headers={"Authorization": f"Bearer {auditor}"},
                     timeout=15).json()["story"]
    assert texts == [step["text"] for step in told]
    assert texts[:5] == [f"{alice} sent a merchant to {bob} carrying 6000 food, 2000 gold",
                         f"{alice} offers to buy wood, paying in food, 1 dice each", f"{bob} wants gold in return",
                         f"{alice} agrees", f"{bob} agrees"]
    assert texts[5].startswith(f"round 1: {alice} rolled "), texts[5:]  # its cities are named by their players
    assert page.locator(".city").count() >= 2
    # And a step back tells the step before the last again
    page.get_by_role("button", name="previous step").click()
    assert story.get_by_test_id("story-text").inner_text() == texts[-2]


def test_tampered_event_shows_the_first_divergence(page, base_url: str, auditor: str, stack: Stack,
                                                   shots: Path) -> None:
    # Given a board room with two placements made over HTTP
    room, _ = board_room_played(base_url, auditor, f"tam-{secrets.token_hex(2)}", moves=2)

    # When someone rewrites a placement in Redis and re-chains every hash after it (a careful forger)
    def other_terrain(event: dict) -> None:
        event["terrain"] = "water" if event["terrain"] != "water" else "forest"

    version = rewrite_in_redis(stack.redis_url, 16, room, lambda e: e.type == "board.element_placed", other_terrain,
                            reseal=True)

    # Then verify in the console names the version and shows recorded and recomputed side by side
    page.goto(f"/#/room/{room}")
    sign_in_as_auditor(page, auditor)
    page.get_by_role("button", name="Verify").click()
    result = page.get_by_test_id("verify-result")
    result.wait_for()
    assert "divergence" in result.inner_text() and f"version {version}" in result.inner_text()
    recorded, recomputed = page.get_by_test_id("recorded").inner_text(), page.get_by_test_id("recomputed").inner_text()
    assert recorded != recomputed
    page.screenshot(path=shots / "10-tampered.png", full_page=True)


def test_accessibility_basics(page, base_url: str, auditor: str) -> None:
    # Every form control on the rooms page has a label, and the console is reachable by keyboard
    page.goto("/")
    page.get_by_role("region", name="Rooms").wait_for()
    unlabeled = page.evaluate("""() => [...document.querySelectorAll('input, select, textarea')]
        .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')).map(el => el.outerHTML)""")
    assert unlabeled == []
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.tagName") in ("A", "INPUT", "SELECT", "BUTTON")
    # /docs and /redoc load their assets from the package
    for path in ("/docs", "/redoc"):
        body = httpx.get(base_url + path).text
        assert "cdn.jsdelivr" not in body and "/console/vendor/" in body


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/asyncapi"])
def test_each_api_docs_page_renders_the_api_in_the_browser(page, base_url: str, path: str, shots: Path) -> None:
    # Given what the page documents: every operation's summary by tag (OpenAPI), every channel's address
    if path == "/asyncapi":
        document = httpx.get(base_url + path).json()
        expected = {"": [channel["address"] for channel in document["channels"].values()]}
    else:
        document = httpx.get(base_url + "/openapi.json").json()
        expected = {}
        for item in document["paths"].values():
            for operation in item.values():
                expected.setdefault(operation["tags"][0], []).append(operation["summary"])
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    outside: list[str] = []
    page.on("request", lambda request: None if request.url.startswith((base_url, "blob:" + base_url))
            else outside.append(request.url))
    # When the page is opened in the browser (ReDoc lists a tag's operations once the tag is opened)
    page.goto(path)
    missing = []
    for tag, texts in expected.items():
        if path == "/redoc":
            page.get_by_text(tag, exact=True).first.click()
        page.get_by_text(texts[0], exact=False).first.wait_for()
        shown = page.locator("body").inner_text()
        missing += [text for text in texts if text not in shown]
    page.screenshot(path=shots / f"14-docs{path.replace('/', '-')}.png")
    # Then the rendered page shows each of them, with no error in the browser's console (a refused or failed
    # load is one) and nothing asked of another server: every asset is this server's own
    assert missing == []
    assert problems == []
    assert outside == []


def test_forensics_explain_bisect_fork_and_a_dispute_bundle(page, base_url: str, auditor: str, shots: Path) -> None:
    # Given a board room with three placements, ended (only an ended room may be forked)
    room, token = board_room_played(base_url, auditor, f"fx-{secrets.token_hex(2)}", moves=3)
    ended = httpx.post(f"{base_url}/rooms/{room}/end", headers={"Authorization": f"Bearer {token}"}, json={})
    assert ended.status_code == 200, ended.text
    # When the auditor opens it and asks why `time` is what it is, and when `placed >= 2` first held
    page.goto(f"/#/room/{room}")
    sign_in_as_auditor(page, auditor)
    panel = page.get_by_role("region", name="Forensics")
    panel.get_by_label("explain the value at").fill("placed")
    panel.get_by_role("button", name="explain").click()
    result = panel.get_by_test_id("forensics-result")
    result.get_by_text("changed 4 time(s)").wait_for()  # created at 0, then every placement counted one more
    page.screenshot(path=shots / "12-forensics-explain.png", full_page=True)
    # Then each change reads as words: its version, a space, what happened ("v4 placed element...", never
    # "v4placed": the template's line break between the button and the summary is no space)
    changes = result.get_by_role("listitem").all_inner_texts()
    assert len(changes) == 4 and all(re.match(r"v\d+ \S", change) for change in changes), changes
    panel.get_by_label("first version where").fill("placed >= 2")
    panel.get_by_role("button", name="bisect").click()
    result.get_by_text("first holds at").wait_for()
    assert "first holds at version 4" in result.inner_text()  # created, joined, placed, placed
    page.screenshot(path=shots / "12-forensics-bisect.png", full_page=True)
    # Then a dispute bundle downloads, and a fork opens as a new room
    with page.expect_download() as download:
        panel.get_by_role("button", name="dispute bundle of versions").click()
    assert download.value.suggested_filename.endswith(".bundle.json")
    assert "check it with almanac verify-bundle" in result.inner_text()
    # The ended room revealed its seed, checked in this browser against the commitment
    assert "in this browser matches the commitment" in page.get_by_test_id("seed-check").inner_text()
    panel.get_by_role("button", name="fork at version").click()
    result.get_by_text("forked as").wait_for()
    # and the fork's id is a word of its own before what it is ("...-f4-a1b2c3 (from version 4; ...")
    assert re.search(r"forked as \S+ \(from version \d+;", result.inner_text()), result.inner_text()
    result.get_by_role("link").click()
    page.get_by_text(f"sandbox fork of {room}").wait_for()
    page.screenshot(path=shots / "13-fork.png", full_page=True)


def open_as_player(page, room: str, player: str, token: str) -> None:
    """The console on ``room`` with ``player``'s seat, as the browser that created or joined it keeps it."""
    page.goto("/")
    page.evaluate("([key, seat]) => sessionStorage.setItem(key, JSON.stringify(seat))",
                  [f"almanac.seat.{room}", {"player": player, "token": token}])
    page.goto(f"/#/room/{room}")


def test_a_player_sees_the_current_element_and_where_the_typed_move_lands(page, base_url: str, auditor: str,
                                                                           shots: Path) -> None:
    # Given a board room with one placement, opened by its player
    player = f"eve-{secrets.token_hex(2)}"
    room, token = board_room_played(base_url, auditor, player, moves=1)
    open_as_player(page, room, player, token)
    view = httpx.get(f"{base_url}/rooms/{room}/view", headers={"Authorization": f"Bearer {token}"}).json()["view"]
    element = view["current_element"]
    # Then the current element is drawn with its shape, terrain and time cost
    drawn = page.get_by_test_id("current-element")
    drawn.wait_for()
    assert drawn.locator(".cell.filled").count() == "".join(element["shape"]).count("1")
    assert f"#{element['number']}: {element['terrain']}, costs {element['time']} time" in drawn.inner_text()
    # and the state's title reads as words
    version = page.get_by_test_id("latest").inner_text()
    assert f"State at version {version} as {player} saw it" in page.get_by_role("region", name="State at version").inner_text()
    # and the command's description shows its field names as code, not between double backticks
    description = page.get_by_test_id("command-description")
    assert "`" not in description.inner_text() and description.locator("code", has_text="mirror").count() == 1
    # and the player's timeline names events in words, not as their types
    names = page.locator(".timeline tbody tr td:nth-child(4)").all_inner_texts()
    assert names and all(re.fullmatch(r"[a-z0-9 ]+", name) for name in names), names

    # When the player types a legal placement
    state = board_state(base_url, auditor, room)
    legal = board_rules.legal_placements(state.board, board_rules.current_element(state))[0]
    page.locator("#cmd-row").fill(str(legal.row))
    page.locator("#cmd-column").fill(str(legal.column))
    page.locator("#cmd-rotation").fill(str(legal.rotation))
    page.locator("#cmd-mirror").set_checked(legal.mirror)
    # Then the board previews exactly the cells it would cover, all free
    covered = board_rules.placement_cells(board_rules.current_element(state), legal.row, legal.column,
                                          legal.rotation, legal.mirror)
    board = page.get_by_test_id("board")
    page.wait_for_function(f"document.querySelectorAll('[data-testid=board] .cell.preview').length === {len(covered)}")
    for row, column in covered:
        assert "preview" in board.get_by_label(f"row {row} column {column}:").get_attribute("class")
    assert board.locator(".cell.preview.blocked").count() == 0
    page.screenshot(path=shots / "15-board-preview.png", full_page=True)
    # When the anchor is moved to where the same orientation covers a mountain (an anchor of its own: with some
    # shapes the anchor's cell is empty, so the anchor on a mountain would not always cover it)
    onto_mountain = next(
        move for move, cells in board_rules.in_map_placements(board_rules.current_element(state))
        if (move.rotation, move.mirror) == (legal.rotation, legal.mirror)
        and any(state.board[row][column] == MOUNTAIN for row, column in cells)
    )
    page.locator("#cmd-row").fill(str(onto_mountain.row))
    page.locator("#cmd-column").fill(str(onto_mountain.column))
    # Then the preview says the move would be refused, before it is sent
    page.get_by_test_id("preview-blocked").wait_for()
    assert board.locator(".cell.preview.blocked").count() >= 1
    page.screenshot(path=shots / "16-board-preview-blocked.png", full_page=True)
    # When the player clicks the cell where the legal placement's anchor is
    board.get_by_label(f"row {legal.row} column {legal.column}:").click()
    # Then the form takes that row and column (at the console's next render: read at once after the click, the row
    # was once still the blocked one), and the preview is back to free cells
    from playwright.sync_api import expect  # noqa: PLC0415 - Playwright only where a browser runs

    expect(page.locator("#cmd-row")).to_have_value(str(legal.row), timeout=TIMEOUT_MS)
    expect(page.locator("#cmd-column")).to_have_value(str(legal.column), timeout=TIMEOUT_MS)
    page.wait_for_function("document.querySelectorAll('[data-testid=board] .cell.preview.blocked').length === 0")
    assert board.locator(".cell.preview").count() == len(covered)


def test_the_timeline_follows_the_version_and_a_drawn_deck_is_one_change(page, base_url: str, auditor: str,
                                                                         shots: Path) -> None:
    # Given a board room with a dozen placements: more events than the timeline shows at once
    room, _ = board_room_played(base_url, auditor, f"tl-{secrets.token_hex(2)}", moves=12)
    page.goto(f"/#/room/{room}")
    sign_in_as_auditor(page, auditor)
    latest = httpx.get(f"{base_url}/rooms/{room}").json()["version"]
    page.locator(f'[data-loaded="{latest}|"]').wait_for()
    timeline = page.get_by_role("list", name="Event timeline")

    def selected_row_in_sight() -> bool:
        box, row = timeline.bounding_box(), timeline.locator("tr.selected").bounding_box()
        return box["y"] <= row["y"] and row["y"] + row["height"] <= box["y"] + box["height"] + 1

    # When the first placement's version is compared with the one before it: the deck lost its top card
    slider = page.get_by_role("slider", name="Version")
    slider.fill("3")
    page.locator('[data-loaded="3|"]').wait_for()
    lines = page.get_by_test_id("diff").inner_text().splitlines()
    # Then the deck is one change (the card that left it, from the server's one tree-diff), not every index after
    # the first
    [deck] = [line for line in lines if line.startswith("deck")]
    assert re.fullmatch(r"deck\[\d+\]: .+ → null", deck), deck
    # When the slider goes to the latest version, then to the first, by keyboard
    page.wait_for_function("document.querySelector('.timeline').scrollHeight > document.querySelector('.timeline').clientHeight")
    slider.focus()
    for key, version in (("End", latest), ("Home", 1)):
        slider.press(key)
        page.locator(f'[data-loaded="{version}|"]').wait_for()
        # Then the timeline shows that version's row
        assert selected_row_in_sight(), key
    page.screenshot(path=shots / "17-timeline-first.png", full_page=True)


@contextlib.contextmanager
def picture_of(browser, base_url: str, auditor: str, room: str) -> Iterator[tuple[Any, Any]]:
    """``room`` opened by the auditor in a 1280 px wide window, once its picture is drawn: (page, its state panel)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=base_url)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(f"/#/room/{room}")
        sign_in_as_auditor(page, auditor)
        panel = page.get_by_role("region", name="State at version")
        panel.locator("[role=grid], .city").first.wait_for()
        yield page, panel
    finally:
        context.close()


PICTURED = [name for name in registry.installed() if registry.manifest(name).console_picture]


@pytest.mark.parametrize("ruleset", PICTURED)
def test_every_game_picture_has_a_legend_and_fits_a_1280_px_page(browser, base_url: str, auditor: str,
                                                                 ruleset: str, shots: Path) -> None:
    # Given a room of the game, opened by the auditor in a 1280 px wide window
    players = [f"ann-{secrets.token_hex(2)}", f"ben-{secrets.token_hex(2)}"]
    options = {"players": players} if ruleset == "realm" else {}
    created = httpx.post(f"{base_url}/rooms", json={"ruleset": ruleset, "player": players[0], "options": options})
    assert created.status_code == 201, created.text
    with picture_of(browser, base_url, auditor, created.json()["room"]) as (page, panel):
        page.screenshot(path=shots / f"18-picture-{ruleset}.png", full_page=True)
        # Then nothing in the picture reaches past the page's width, nor the page itself
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        right = page.evaluate("""() => Math.max(...[...document.querySelectorAll('[aria-label="State at version"] *')]
            .map(el => el.getBoundingClientRect().right))""")
        assert right <= 1280
        # and no emoji the system's fonts may lack (it would show as an empty box)
        assert [ch for ch in panel.inner_text() if ord(ch) >= 0x1F000] == []
        # and every short mark drawn in the picture's cells is explained in its legend
        explained = panel.get_by_role("list", name="legend").inner_text()
        marks = {word for text in panel.get_by_role("gridcell").all_inner_texts() for word in text.split()
                 if len(word) <= 3 and not any(ch.isdigit() for ch in word)}
        assert [mark for mark in marks if mark not in explained] == []
        # and no number is left half-drawn ("pop 50/" where a sector type has no cap)
        cells = panel.get_by_role("gridcell").all_inner_texts()
        assert [text for text in cells if re.search(r"\d/(\s|$)", text)] == []


def test_a_sectors_building_is_named_in_words_that_wrap_between_them(browser, base_url: str, auditor: str,
                                                                      shots: Path) -> None:
    # Given a sectors colony with a lumber camp built in its first sector (row 3, column 3 of the 8x8 grid)
    created = httpx.post(f"{base_url}/rooms", json={"ruleset": "sectors", "player": f"ann-{secrets.token_hex(2)}"})
    room, token = created.json()["room"], created.json()["token"]
    built = httpx.post(f"{base_url}/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"},
                       json={"command": {"kind": "build", "row": 3, "column": 3, "building": "lumber_camp"}})
    assert built.status_code == 200, built.text
    # When the auditor opens it in a 1280 px wide window
    with picture_of(browser, base_url, auditor, room) as (page, panel):
        page.screenshot(path=shots / "18-picture-sectors-built.png", full_page=True)
        cell = panel.locator('[aria-label^="sector 3,3:"]')  # its type is drawn from the seed
        # Then the building is named in words ("lumber camp"), which a narrow cell wraps between, not inside one
        # ("lumber_cam" / "p": an identifier has no place to break but anywhere)
        assert "lumber camp" in cell.inner_text() and "_" not in cell.inner_text(), cell.inner_text()


def test_a_player_who_closes_the_tab_gets_the_seat_back_with_the_seat_key(browser, base_url: str, shots: Path) -> None:
    # Given a realm room alice created, and bob joining it in the console
    room, alice, bob, alices_token = realm_room_waiting_for_bob(base_url)
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, base_url=base_url)
    errors: list[str] = []
    try:
        tab = context.new_page()
        tab.set_default_timeout(TIMEOUT_MS)
        tab.on("pageerror", lambda error: errors.append(str(error)))
        tab.goto(f"/#/room/{room}")
        tab.locator("#join-player").fill(bob)
        tab.get_by_role("button", name="Join").click()
        expect_text(tab.get_by_test_id("seat"), bob)
        assert tab.get_by_test_id("key-substituted").count() == 0  # his join registered the key it sent
        # (the browser signed his join with the key it registered: WebCrypto, events.signing.join_bytes)
        report = httpx.get(f"{base_url}/rooms/{room}/verification", timeout=15,
                           headers={"Authorization": f"Bearer {alices_token}"}).json()
        assert report["ok"] and report["signed_joins"] == [bob], report
        # When he closes the tab and opens the room again (the token lived in the tab only)
        tab.close()
        tab = context.new_page()
        tab.set_default_timeout(TIMEOUT_MS)
        tab.on("pageerror", lambda error: errors.append(str(error)))
        tab.goto(f"/#/room/{room}")
        # Then the seat key this browser kept gets his seat back
        expect_text(tab.get_by_test_id("seat"), bob)
        tab.get_by_test_id("export-seat-key").click()
        exported = tab.get_by_test_id("seat-key").input_value()
        tab.screenshot(path=str(shots / "seat-key-reclaimed.png"), full_page=True)
        assert json_of(exported)["player"] == bob and len(json_of(exported)["seat_key"]) == 43
    finally:
        context.close()
    # and the exported key takes the seat back in another browser; a tampered one does not
    other = browser.new_context(viewport={"width": 1400, "height": 1000}, base_url=base_url)
    try:
        tab = other.new_page()
        tab.set_default_timeout(TIMEOUT_MS)
        tab.on("pageerror", lambda error: errors.append(str(error)))
        tab.goto(f"/#/room/{room}")
        tampered = dict(json_of(exported), seat_key="A" * 43)
        tab.locator("#seat-key-import").fill(json.dumps(tampered))
        tab.get_by_role("button", name="Take my seat back").click()
        expect_text(tab.get_by_test_id("refusal"), "seat_key_invalid")
        tab.locator("#seat-key-import").fill(exported)
        tab.get_by_role("button", name="Take my seat back").click()
        expect_text(tab.get_by_test_id("seat"), bob)
    finally:
        other.close()
    assert not errors, errors


@pytest.mark.parametrize("opener", ["public", "auditor"])
def test_a_player_who_joins_on_the_room_page_sees_the_room_as_his_seat_at_once(page, auditor: str, opener: str,
                                                                              base_url: str, shots: Path) -> None:
    # Given a live realm room alice created with a seat for bob, opened in the console by the public or the auditor
    room, alice, bob, _ = realm_room_waiting_for_bob(base_url)
    page.goto(f"/#/room/{room}")
    if opener == "auditor":
        sign_in_as_auditor(page, auditor)
        page.get_by_label("realm cities").wait_for()  # the auditor's picture of the full state
    # When bob joins on that page
    page.locator("#join-player").fill(bob)
    page.get_by_role("button", name="Join").click()
    expect_text(page.get_by_test_id("seat"), bob)
    # Then, with no reload, the page shows the room as bob's seat sees it: the heading says so, the "view as" choice
    # is his, and the picture is drawn from his view (his city's storage, alice's hidden from him)
    state = page.get_by_role("region", name="State at version")
    expect_text(state.get_by_role("heading", level=2), f"as {bob} saw it")
    picture = state.get_by_label("realm cities")
    expect_text(picture, "storage hidden")
    page.screenshot(path=str(shots / f"join-on-the-page-as-{opener}.png"), full_page=True)
    assert page.locator("#viewer").input_value() == bob
    assert "no picture for this rule-set" not in state.inner_text()
    cities = {city.locator("strong").inner_text(): city.inner_text() for city in picture.locator(".city").all()}
    assert "storage hidden" in cities[alice] and "storage hidden" not in cities[bob], cities
    # and it is the page a reload shows the public's browser holding his seat
    if opener == "public":
        seen = state.inner_text()
        page.reload()
        expect_text(state.get_by_label("realm cities"), "storage hidden")
        expect_text(state.get_by_role("heading", level=2), f"as {bob} saw it")
        assert state.inner_text() == seen


def json_of(text: str) -> dict:
    return json.loads(text)


def realm_room_waiting_for_bob(base_url: str) -> tuple[str, str, str, str]:
    """A realm room alice created through the API with a seat for bob (names of their own): (room, alice, bob,
    alice's token)."""
    suffix = secrets.token_hex(3)
    alice, bob = f"alice-{suffix}", f"bob-{suffix}"
    created = httpx.post(f"{base_url}/rooms", json={"ruleset": "realm", "player": alice,
                                                    "options": {"players": [alice, bob]}}, timeout=15)
    assert created.status_code == 201, created.text
    return created.json()["room"], alice, bob, created.json()["token"]


def expect_text(locator, text: str) -> None:
    from playwright.sync_api import expect  # noqa: PLC0415 - Playwright only where a browser runs

    expect(locator).to_contain_text(text, timeout=TIMEOUT_MS)


def seat_in_browser(page, room: str, player: str, token: str) -> None:
    page.goto("/")
    page.evaluate("([room, player, token]) => sessionStorage.setItem(`almanac.seat.${room}`, JSON.stringify({player, token}))",
                  [room, player, token])
    page.goto(f"/#/room/{room}")


def test_the_console_offers_no_bot_where_the_room_has_no_bot_policy(page, base_url: str) -> None:
    # Given bob's seat, in this browser, of a realm room created without seat bots
    room, _, tokens = realm_trade_played(base_url)
    bob, token = list(tokens.items())[1]
    seat_in_browser(page, room, bob, token)
    # When the room's page has drawn his seat's view
    expect_text(page.get_by_test_id("seat"), bob)
    # Then no control offers to leave the seat to a bot (the room would refuse it)
    assert page.get_by_role("region", name="Bot seat").count() == 0


def test_a_room_created_in_the_console_with_seat_bots_offers_its_player_a_bot(page, base_url: str) -> None:
    # Given a person creating a claim room (its rules name no deadline) with seat bots ticked
    page.goto("/")
    page.locator("#create-ruleset").select_option("claim")
    page.locator("#create-player").fill(f"cleo-{secrets.token_hex(2)}")
    page.locator("#create-seat-bots").check()
    page.get_by_role("button", name="Create room").click()
    page.get_by_test_id("seat").wait_for()
    room = page.get_by_test_id("room-id").inner_text()
    # Then the room recorded its bot policy, and its page offers her to leave her seat to a bot
    assert httpx.get(f"{base_url}/rooms/{room}", timeout=15).json()["bot_policy"] == {"after_missed": 0}
    page.get_by_role("region", name="Bot seat").get_by_role("button", name="Leave my seat to a bot").wait_for()


def test_a_seated_player_leaves_the_seat_to_a_bot_from_the_console(page, base_url: str, shots: Path) -> None:
    # Given bob's seat of a live realm room created with seat bots, in this browser
    room, _, tokens = realm_trade_played(base_url, seat_bots=True)
    bob, token = list(tokens.items())[1]
    page.goto("/")
    page.evaluate("([room, player, token]) => sessionStorage.setItem(`almanac.seat.${room}`, JSON.stringify({player, token}))",
                  [room, bob, token])
    page.goto(f"/#/room/{room}")
    # When he leaves his seat to a bot
    panel = page.get_by_role("region", name="Bot seat")
    panel.get_by_role("button", name="Leave my seat to a bot").click()
    answer = panel.get_by_test_id("bot-seat-answer")
    answer.wait_for()
    panel.screenshot(path=str(shots / "leave-seat-to-bot.png"))
    # Then the console says so, and the room's log records the handover of his seat
    assert answer.inner_text() == f"{bob}'s seat is now played by a bot"
    events = httpx.get(f"{base_url}/rooms/{room}/events", headers={"Authorization": f"Bearer {token}"}, timeout=15)
    handed = [e for e in events.json()["events"] if e["type"] == "room.seat_to_bot"]
    assert [e["event"]["player"] for e in handed] == [bob], handed


def test_a_join_answered_with_another_key_than_the_browser_sent_is_flagged_at_once(page, base_url: str,
                                                                                   shots: Path) -> None:
    # Given a realm room alice created, and an operator in the way of bob's join who answers it with a key of its own
    room, alice, bob, _ = realm_room_waiting_for_bob(base_url)
    operators_key = "ab" * 32

    def substituted(route) -> None:
        answer = route.fetch()
        body = answer.json()
        for event in body.get("events", []):
            if isinstance(event.get("event"), dict) and "public_key" in event["event"]:
                event["event"]["public_key"] = operators_key
        route.fulfill(response=answer, json=body)

    page.route(f"**/rooms/{room}/join", substituted)
    # When bob joins in the console (which sends the key it made)
    page.goto(f"/#/room/{room}")
    page.locator("#join-player").fill(bob)
    page.get_by_role("button", name="Join").click()
    # Then the console says at once that the join registered another key, and how to keep the evidence
    warning = page.get_by_test_id("key-substituted")
    warning.wait_for()
    page.get_by_role("region", name="Play", exact=True).screenshot(path=str(shots / "join-key-substituted.png"))
    assert "did not register the key this browser made" in warning.inner_text()
    assert f"can sign commands as {bob}" in warning.inner_text() and "--seat-key" in warning.inner_text()
    # and an honest join (no one in the way) shows no such warning
    page.unroute(f"**/rooms/{room}/join")
    other = httpx.post(f"{base_url}/rooms", json={"ruleset": "realm", "player": alice,
                                                  "options": {"players": [alice, bob]}}, timeout=15).json()["room"]
    page.goto(f"/#/room/{other}")
    page.locator("#join-player").fill(bob)
    page.get_by_role("button", name="Join").click()
    page.get_by_test_id("seat").wait_for()
    assert page.get_by_test_id("key-substituted").count() == 0



# What the gateway answers a create whose own join it could not record (services/gateway/api_rooms.py):
# refused by the room, or not answered within its wait. Neither answer holds a join of the creator's.
JOIN_NOT_RECORDED = {
    "refused": {"code": "no_seat", "message": "the creator has no seat in this room"},
    "pending": {"code": "outcome_pending", "message": "the join has not been answered yet"},
}


@pytest.mark.parametrize("why", sorted(JOIN_NOT_RECORDED))
def test_a_create_whose_join_was_not_recorded_is_not_flagged_as_another_key(page, why: str, shots: Path) -> None:
    # Given a create in the console whose answer says the creator's join was not recorded (the room exists)
    def join_not_recorded(route) -> None:
        if route.request.method != "POST":  # the console's list of rooms
            route.continue_()
            return
        real = route.fetch()
        body = real.json()
        body["events"] = [e for e in body["events"] if e["type"] != "room.player_joined"]
        for joined_only in ("seat_key", "version"):
            body.pop(joined_only, None)
        body.update(joined=False, join_error=JOIN_NOT_RECORDED[why])
        route.fulfill(response=real, json=body)

    page.route("**/rooms", join_not_recorded)
    creator = f"cara-{secrets.token_hex(3)}"
    page.goto("/")
    page.locator("#create-ruleset option[value='realm']").wait_for(state="attached")
    page.locator("#create-ruleset").select_option("realm")
    page.locator("#create-player").fill(creator)
    # When she creates the room (the console sends the key it made with the create's join)
    with page.expect_response(lambda r: r.url.endswith("/rooms") and r.request.method == "POST") as created:
        page.get_by_role("button", name="Create room").click()
    sent = created.value.request.post_data_json
    assert sent["public_key"] and sent["join_signature"], sent
    assert created.value.json()["join_error"]["code"] == JOIN_NOT_RECORDED[why]["code"]
    # Then the room's page opens with her seat and no key substitution: the answer registered no key of hers at all
    expect_text(page.get_by_test_id("seat"), creator)
    page.get_by_role("region", name="Play", exact=True).wait_for()
    page.screenshot(path=str(shots / f"create-join-{why}-no-flag.png"), full_page=True)
    assert page.get_by_test_id("key-substituted").count() == 0
    assert page.evaluate("Object.keys(localStorage).filter((k) => k.startsWith('almanac-key-warning:'))") == []


def test_a_join_answered_later_is_resent_under_its_id_and_seats_the_player_unflagged(page, base_url: str,
                                                                                     shots: Path) -> None:
    # Given a realm room alice created, and bob's join answered 202 the first time: the engine decides it after the
    # gateway's wait, so that answer holds no event, no token and no seat
    room, alice, bob, _ = realm_room_waiting_for_bob(base_url)
    sent: list[dict] = []

    def answered_later_once(route) -> None:
        sent.append(route.request.post_data_json)
        if len(sent) > 1:  # the resend reaches the server, which answers the decided join under its id
            route.continue_()
            return
        route.fetch()  # the join reaches the server; its answer comes later
        url = f"/rooms/{room}/commands/{sent[0]['command_id']}"
        route.fulfill(status=202, headers={"Location": url}, json={
            "code": "outcome_pending", "message": "the engine has not answered within the wait; GET the outcome URL "
            "later", "command_id": sent[0]["command_id"], "outcome_url": url})

    page.route(f"**/rooms/{room}/join", answered_later_once)
    # When bob joins in the console (which sends the key it made)
    page.goto(f"/#/room/{room}")
    page.locator("#join-player").fill(bob)
    page.get_by_role("button", name="Join").click()
    # Then the console resends the same join under the same command id, and the decided answer seats bob with his
    # key kept and no key substitution flagged (the 202 held no join to compare keys with)
    expect_text(page.get_by_test_id("seat"), bob)
    page.screenshot(path=str(shots / "join-202-resent-seated.png"), full_page=True)
    assert len(sent) == 2 and sent[0] == sent[1] and sent[0]["command_id"] and sent[0]["public_key"], sent
    assert page.evaluate(f"localStorage.getItem('almanac-key-warning:{room}')") is None
    assert page.get_by_test_id("key-substituted").count() == 0
    assert page.evaluate(f"localStorage.getItem('almanac-nonce:{room}:{bob}')") == sent[0]["nonce"]
    assert page.evaluate(f"JSON.parse(sessionStorage.getItem('almanac.seat.{room}')).player") == bob


def test_a_join_never_decided_seats_nobody_and_says_so(page, base_url: str, shots: Path) -> None:
    # Given a realm room whose joins the gateway answers 202 every time (the engine is not deciding them)
    room, alice, bob, _ = realm_room_waiting_for_bob(base_url)
    sent: list[dict] = []

    def never_answered(route) -> None:
        sent.append(route.request.post_data_json)
        route.fulfill(status=202, json={"code": "outcome_pending", "message": "not answered within the wait",
                                        "command_id": sent[-1]["command_id"], "outcome_url": "/x"})

    page.route(f"**/rooms/{room}/join", never_answered)
    # When bob joins in the console
    page.goto(f"/#/room/{room}")
    page.locator("#join-player").fill(bob)
    page.get_by_role("button", name="Join").click()
    # Then, after resending the one join a few times, it says the join is not decided yet and seats nobody: no
    # "playing as" with no name, no seat kept without a player or token
    expect_text(page.get_by_test_id("refusal"), "has not decided this yet")
    page.screenshot(path=str(shots / "join-202-never-decided.png"), full_page=True)
    assert len(sent) > 1 and len({s["command_id"] for s in sent}) == 1, sent
    assert page.get_by_test_id("seat").count() == 0
    assert page.evaluate(f"sessionStorage.getItem('almanac.seat.{room}')") is None
    # and when the engine decides again and bob presses Join once more, the same join goes (its id, nonce and key),
    # never a second one, and seats him
    page.unroute(f"**/rooms/{room}/join")
    with page.expect_request(f"**/rooms/{room}/join") as resent:
        page.get_by_role("button", name="Join").click()
    assert resent.value.post_data_json == sent[0]
    expect_text(page.get_by_test_id("seat"), bob)
    assert page.evaluate(f"localStorage.getItem('almanac-nonce:{room}:{bob}')") == sent[0]["nonce"]


def test_a_command_the_console_signed_is_verified_by_the_python_verifier(page, base_url: str, auditor: str) -> None:
    # Given bob joining a realm room in the console, which makes his key and signs with the TypeScript client's
    # signing module (console/signing.js): the requests it sends are kept
    room, _, bob, _ = realm_room_waiting_for_bob(base_url)
    sent: dict[str, dict] = {}
    page.on("request", lambda request: sent.update({request.url.rsplit("/", 1)[-1]: request.post_data_json})
            if request.method == "POST" and request.url.startswith(f"{base_url}/rooms/{room}/") else None)
    page.goto(f"/#/room/{room}")
    page.locator("#join-player").fill(bob)
    page.get_by_role("button", name="Join").click()
    expect_text(page.get_by_test_id("seat"), bob)
    # When he ends his turn through the console's form
    page.locator("#command-kind").select_option("end_turn")
    page.get_by_role("button", name="Send command").click()
    page.get_by_test_id("accepted").wait_for()
    # Then the Python verifier (events.signing, the engine's own check) accepts the join's proof of possession and
    # the command's signature, over exactly the bytes the server's side says a player signs
    join, command = sent["join"], sent["commands"]
    assert signature_valid(join["public_key"], join["signature"],
                           join_bytes(room, bob, join["public_key"], nonce_commitment(join["nonce"])))
    assert command["command"] == {"kind": "end_turn"} and isinstance(command["seen_version"], int)
    assert signature_valid(join["public_key"], command["signature"], command_bytes(
        room, bob, recorded_command_id(room, bob, command["command_id"]), command["command"], command["seen_version"]))
    # and a signature over another version than the one sent is not his (the version is in the signed bytes)
    assert not signature_valid(join["public_key"], command["signature"], command_bytes(
        room, bob, recorded_command_id(room, bob, command["command_id"]), command["command"],
        command["seen_version"] + 1))
    # and the key the console kept is the Python client's format: imported, it is the key his join registered
    kept = page.evaluate(f"localStorage.getItem('almanac-key:{room}:{bob}')")
    assert PlayerKey.import_key(kept).public_key == join["public_key"]
    # and the room's verification (the Python verifier over the stored log) counts his join and command as signed
    report = httpx.get(f"{base_url}/rooms/{room}/verification", headers={"Authorization": f"Bearer {auditor}"},
                       timeout=15).json()
    assert report["ok"] and bob in report["signing_players"] and bob in report["signed_joins"], report
