"""The dashboard in a real browser: Debian's headless Chromium driven by Selenium
against the app served by uvicorn on 127.0.0.1. Signs in with keys, reads every main
page (screenshots go to test-artifacts/, or $TOOLDB_TEST_ARTIFACTS), disables a tool,
undoes an OODA act, finds the partial run in the review queue, shows a tool named like
an XSS payload as text, and cannot change anything with a read key."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.ui import WebDriverWait

from tests.server_support import XSS_NAME, seed, serving
from tooldb import Registry
from tooldb.server import Scope, create_key

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(os.environ.get("TOOLDB_TEST_ARTIFACTS", REPO / "test-artifacts"))


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    assert os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK), (
        "the browser tests need Debian's chromium and chromium-driver "
        "(apt-get install chromium chromium-driver; .ci/run and the README install them)"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1400,1000", "--disable-gpu"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def shot(driver: WebDriver, name: str) -> None:
    """A full-page screenshot into the artifacts folder."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, max(1000, min(int(height) + 40, 4000)))
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))
    driver.set_window_size(1400, 1000)


def sign_in(driver: WebDriver, url: str, key: str) -> None:
    driver.get(f"{url}/")
    assert "/login" in driver.current_url  # no key, no page
    driver.find_element(By.NAME, "key").send_keys(key)
    follow(driver, driver.find_element(By.CSS_SELECTOR, "form.login button"))
    assert driver.find_element(By.TAG_NAME, "h1").text.startswith("Tools")


def follow(driver: WebDriver, element: WebElement) -> None:
    """Click a link or a form's button and wait for the next page to replace this one."""
    page = driver.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(driver, 20).until(staleness_of(page))


def no_alert(driver: WebDriver) -> bool:
    try:
        driver.switch_to.alert.text  # noqa: B018 (raises when no alert is open)
    except NoAlertPresentException:
        return True
    return False


def row_of(driver: WebDriver, tool: str) -> WebElement:
    for row in driver.find_elements(By.CSS_SELECTOR, "#tools tbody tr"):
        if row.get_attribute("data-tool") == tool:
            return row
    raise AssertionError(f"no row for {tool!r}")


def test_dashboard_in_a_browser(browser: WebDriver, sqlite_registry: Registry) -> None:
    registry = sqlite_registry
    seeded = seed(registry)
    admin = create_key(registry.store, registry.tenant, Scope.ADMIN)
    with serving(registry) as url:
        sign_in(browser, url, admin)
        # the tools table: every tool, the XSS name as text and nothing run
        names = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#tools td.name")]
        assert {"add", "echo", "fail", "flaky", XSS_NAME} <= set(names)
        assert browser.find_elements(By.CSS_SELECTOR, "#tools img") == []
        assert browser.find_elements(By.CSS_SELECTOR, "#tools svg.spark")
        assert no_alert(browser)
        flaky = row_of(browser, "flaky")
        assert flaky.find_element(By.CSS_SELECTOR, "td.state").text == "disabled"
        shot(browser, "tools")

        # a user disables a tool and sees it disabled
        follow(browser, row_of(browser, "add").find_element(By.CSS_SELECTOR, "button.toggle"))
        assert row_of(browser, "add").find_element(By.CSS_SELECTOR, "td.state").text == "disabled"
        assert not registry.get("add").enabled

        # sorting by calls puts the busiest tool first
        calls_header = browser.find_element(By.XPATH, "//th[normalize-space()='Calls']")
        calls_header.click()  # ascending
        calls_header.click()  # descending
        first = browser.find_element(By.CSS_SELECTOR, "#tools tbody tr td.name").text
        assert first == "flaky"

        # the review queue lists the partial run; its page shows turns, calls, graph
        follow(browser, browser.find_element(By.LINK_TEXT, "Review queue"))
        queue = browser.find_element(By.ID, "runs").text
        assert seeded.partial_run[:12] in queue and "partial" in queue
        assert seeded.success_run[:12] not in queue
        shot(browser, "review")
        follow(browser, browser.find_element(By.LINK_TEXT, seeded.partial_run[:12]))
        assert "reached the limit of 2 iterations" in browser.find_element(By.TAG_NAME, "main").text
        browser.get(f"{url}/runs/{seeded.success_run}")
        assert len(browser.find_elements(By.CSS_SELECTOR, "ol.turns li")) == 4
        assert browser.find_elements(By.CSS_SELECTOR, ".graph svg g.node.run")
        assert browser.find_elements(By.CSS_SELECTOR, ".graph svg g.node.result-ok")
        shot(browser, "run")
        follow(browser, browser.find_element(By.CSS_SELECTOR, "#calls td a"))
        assert "add" in browser.find_element(By.TAG_NAME, "h1").text
        shot(browser, "call")

        browser.get(f"{url}/runs?status=success")
        listed = browser.find_element(By.ID, "runs").text
        assert seeded.success_run[:12] in listed and seeded.partial_run[:12] not in listed
        shot(browser, "runs")

        # try selection: the ranking with every score part
        browser.get(f"{url}/select")
        box = browser.find_element(By.NAME, "task")
        box.send_keys("echo some text back")
        follow(browser, browser.find_element(By.CSS_SELECTOR, "form.select button"))
        ranking = browser.find_elements(By.CSS_SELECTOR, "#ranking tbody tr")
        assert ranking and ranking[0].find_elements(By.TAG_NAME, "td")[1].text == "echo"
        headers = browser.find_element(By.CSS_SELECTOR, "#ranking thead").text
        assert all(part in headers for part in ("Dense", "Lexical", "Success", "Latency"))
        shot(browser, "select")

        # OODA: the act that disabled flaky, undone from the page
        follow(browser, browser.find_element(By.LINK_TEXT, "OODA"))
        acts = browser.find_element(By.ID, "acts").text
        assert "flaky" in acts and "disable" in acts
        follow(browser, browser.find_element(By.ID, "analyse"))
        findings = browser.find_element(By.ID, "findings").text
        assert "flaky" in findings and "low_success" in findings
        shot(browser, "ooda")
        follow(browser, browser.find_element(By.CSS_SELECTOR, "#acts button"))
        assert "undone by" in browser.find_element(By.ID, "acts").text
        assert registry.get("flaky").enabled

        # the API reference renders from the package's own Swagger UI
        browser.get(f"{url}/docs")
        WebDriverWait(browser, 30).until(
            lambda driver: driver.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")
        )
        paths = {e.text for e in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
        assert "/api/tools/{name}/call" in {p.replace("\u200b", "") for p in paths}
        shot(browser, "docs")

        # a read key sees no buttons, and its forged form is refused
        reader = create_key(registry.store, registry.tenant, Scope.READ)
        browser.delete_all_cookies()
        sign_in(browser, url, reader)
        assert browser.find_elements(By.CSS_SELECTOR, "#tools button.toggle") == []
        state = registry.get("echo").enabled
        page = browser.find_element(By.TAG_NAME, "html")
        browser.execute_script(
            "const f = document.createElement('form'); f.method = 'post';"
            "f.action = '/tools/echo/disable'; document.body.appendChild(f); f.submit();"
        )
        WebDriverWait(browser, 20).until(staleness_of(page))
        assert "Cannot do that" in browser.find_element(By.TAG_NAME, "h1").text
        assert registry.get("echo").enabled == state

    # CSRF: an admin's cookie without the page's token changes nothing
    with serving(registry) as url:
        cookies = {"tooldb_key": admin}
        with httpx.Client(base_url=url, cookies=cookies) as forged:
            refused = forged.post("/tools/echo/disable", data={"csrf": "guess"})
            assert refused.status_code == 403 and "CSRF" in refused.text
    assert registry.get("echo").enabled


@pytest.fixture
def sqlite_registry(sqlite_url: str) -> Iterator[Registry]:
    import tooldb
    from tooldb.settings import Settings

    registry = tooldb.open(sqlite_url, settings=Settings(embedder="hash", url=sqlite_url))
    yield registry
    registry.close()
