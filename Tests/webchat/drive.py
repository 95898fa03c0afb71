#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Drives the web chat of `afm chat --web` in a real browser (Debian's chromium, chromium-driver and python3-selenium).

Usage: drive.py URL IMAGE ARTIFACTS

Run by WebChatTests (Swift), which starts afmd with the scripted backend and `afm chat --web`, seeds the history,
and checks the database and the terminal chat afterwards. Each step prints "ok: ..."; the first failure raises,
prints the page and exits 1. Screenshots go to ARTIFACTS.
"""
import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

URL, IMAGE, ARTIFACTS = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(ARTIFACTS, exist_ok=True)
for old in os.listdir(ARTIFACTS):
    if old.startswith("webchat-") and old.endswith(".png"):
        os.remove(os.path.join(ARTIFACTS, old))

options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,860",
                 "--no-first-run", "--disable-extensions", "--disable-background-networking", "--disable-sync",
                 "--disable-component-update", "--disable-default-apps", "--metrics-recording-only", "--mute-audio"):
    options.add_argument(argument)
options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
driver.set_script_timeout(30)


def wait(condition, what, seconds=20):
    try:
        # The page redraws messages as they stream: an element found a moment ago may be gone; look again.
        return WebDriverWait(driver, seconds, poll_frequency=0.1,
                             ignored_exceptions=[StaleElementReferenceException, NoSuchElementException]).until(lambda _: condition())
    except Exception as error:
        raise AssertionError(f"timed out waiting for {what}") from error


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"ok: {what}", flush=True)


def shot(name):
    driver.save_screenshot(os.path.join(ARTIFACTS, f"webchat-{name}.png"))


def by_id(name):
    return driver.find_element(By.ID, name)


def answers():
    return driver.find_elements(By.CSS_SELECTOR, "article.message.assistant")


def last_answer():
    found = answers()
    return found[-1] if found else None


def load():
    driver.get(URL)
    wait(lambda: driver.execute_script("return document.body.dataset.ready") == "true", "the page to start")


def sidebar_titles():
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#conversations .conv-title")]


def open_conversation(title):
    item = wait(lambda: next((e for e in driver.find_elements(By.CSS_SELECTOR, "#conversations li")
                              if e.find_element(By.CSS_SELECTOR, ".conv-title").text == title), None), f"'{title}' in the sidebar")
    item.click()
    wait(lambda: by_id("title").text == title, f"'{title}' to open")


def send(text):
    box = by_id("input")
    box.clear()
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


try:
    load()
    # Nothing from elsewhere: every resource the page loaded came from its own origin.
    origin = driver.execute_script("return location.origin")
    driver.execute_cdp_cmd("Browser.grantPermissions", {"origin": origin, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    resources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    check(all(name.startswith(origin + "/") for name in resources) and len(resources) >= 2,
          f"the page loads only from {origin}: {resources}")
    # The Content-Security-Policy blocks inline script.
    driver.execute_script("const s = document.createElement('script'); s.textContent = 'window.__inline = 1'; document.body.append(s);")
    check(driver.execute_script("return window.__inline === undefined"), "an inline script is refused by the CSP")

    models = [o.text for o in Select(by_id("model")).options]
    check(models[:2] == ["alpha", "slow"], f"the model picker lists /v1/models: {models}")
    check(by_id("conversation-count").text.startswith("50 of 56"), f"the sidebar shows 50 at a time: {by_id('conversation-count').text}")
    by_id("more-conversations").click()
    wait(lambda: by_id("conversation-count").text.startswith("56 of 56"), "the next page of conversations")
    check(by_id("more-conversations").get_attribute("hidden") is not None, "no more pages after the last")

    # Send and stream, with Markdown (code block with copy button, table), token usage and HTML kept as text.
    by_id("new-chat").click()
    Select(by_id("model")).select_by_visible_text("alpha")
    send("hello zebra <b>bold</b><img src=x onerror=alert(1)>")
    wait(lambda: last_answer() is not None and last_answer().get_attribute("data-state") == "complete", "the answer to complete")
    answer = last_answer()
    check("Answer: hello zebra <b>bold</b><img src=x onerror=alert(1)>" in answer.text, "the streamed answer is shown, HTML as text")
    check(not driver.find_elements(By.CSS_SELECTOR, "article.message b, article.message img:not(.attached)"), "no HTML from a message became elements")
    code = answer.find_element(By.CSS_SELECTOR, ".codeblock")
    check(code.find_element(By.CSS_SELECTOR, ".code-head span").text == "python", "the code block names its language")
    check(code.find_element(By.CSS_SELECTOR, "pre code").text == 'print("hi")', "the code block holds the code")
    code.find_element(By.CSS_SELECTOR, "button.copy").click()
    wait(lambda: code.find_element(By.CSS_SELECTOR, "button.copy").text == "Copied", "the copy button to copy")
    check(len(answer.find_elements(By.CSS_SELECTOR, "table tr")) == 2, "the table is a table")
    answer.find_element(By.CSS_SELECTOR, "button.copy-answer").click()
    wait(lambda: answer.find_element(By.CSS_SELECTOR, "button.copy-answer").text == "Copied", "the answer's copy button to copy")
    copied = driver.execute_async_script("navigator.clipboard.readText().then(arguments[0], () => arguments[0](null))")
    check(copied is not None and copied.startswith("Answer: hello zebra <b>bold</b>") and "| a | b |" in copied,
          f"the whole answer is copied as text: {copied!r}")
    usage = answer.find_element(By.CSS_SELECTOR, ".usage").text
    check("input" in usage and "output tokens" in usage, f"the answer shows its token usage: {usage}")
    check(by_id("title").text.startswith("hello zebra"), "the new conversation is titled after the question")
    shot("answer")

    # Stop and retry with the slow model.
    Select(by_id("model")).select_by_visible_text("slow")
    send("count slowly")
    wait(lambda: last_answer() is not None and "tick" in last_answer().text, "the slow answer to start streaming")
    check(by_id("stop").is_displayed(), "Stop shows while an answer streams")
    by_id("stop").click()
    wait(lambda: last_answer().get_attribute("data-state") == "interrupted", "the stopped answer to be interrupted")
    check("done" not in last_answer().text, "the stopped answer did not finish")
    retry = last_answer().find_element(By.CSS_SELECTOR, "button.retry")
    retry.click()
    wait(lambda: last_answer().get_attribute("data-state") == "complete" and "done" in last_answer().text, "the retried answer", 40)
    check(True, "stop and retry")
    conversation = driver.execute_script("return location.hash")
    check(conversation.startswith("#/c/"), f"the address names the conversation: {conversation}")

    # Images: file picker (normalized on the server), paste and drop.
    by_id("file").send_keys(IMAGE)
    wait(lambda: len(driver.find_elements(By.CSS_SELECTOR, "#attachments img")) == 1, "the picked image")
    check("1536×768" in by_id("status").text, f"the picked image was normalized: {by_id('status').text}")
    make_file = """
        const [kind, done] = arguments;
        const canvas = document.createElement('canvas'); canvas.width = 40; canvas.height = 30;
        const context = canvas.getContext('2d'); context.fillStyle = kind === 'paste' ? '#c00' : '#0a0'; context.fillRect(0, 0, 40, 30);
        canvas.toBlob(blob => {
          const transfer = new DataTransfer();
          transfer.items.add(new File([blob], kind + '.png', {type: 'image/png'}));
          if (kind === 'paste') document.getElementById('input').dispatchEvent(new ClipboardEvent('paste', {clipboardData: transfer, bubbles: true, cancelable: true}));
          else document.getElementById('composer').dispatchEvent(new DragEvent('drop', {dataTransfer: transfer, bubbles: true, cancelable: true}));
          done();
        }, 'image/png');
    """
    driver.execute_async_script(make_file, "paste")
    wait(lambda: len(driver.find_elements(By.CSS_SELECTOR, "#attachments img")) == 2, "the pasted image")
    driver.execute_async_script(make_file, "drop")
    wait(lambda: len(driver.find_elements(By.CSS_SELECTOR, "#attachments img")) == 3, "the dropped image")
    Select(by_id("model")).select_by_visible_text("alpha")
    send("what is in the pictures")
    wait(lambda: last_answer().get_attribute("data-state") == "complete" and "pictures" in last_answer().text, "the answer about the images")
    images = driver.find_elements(By.CSS_SELECTOR, "article.message.user img.attached")
    wait(lambda: all(driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", i) for i in images), "the images to show")
    check(len(images) == 3, f"the message carries its three images ({len(images)})")
    shot("images")

    # Search with highlights, then open a hit.
    by_id("new-chat").click()
    by_id("search").send_keys("zebra")
    wait(lambda: any(m.text.lower() == "zebra" for m in driver.find_elements(By.CSS_SELECTOR, "#conversations mark")), "a highlighted hit")
    check(by_id("conversation-count").text.endswith("match") or "match" in by_id("conversation-count").text, "search reports its matches")
    shot("search")
    driver.find_element(By.CSS_SELECTOR, "#conversations li").click()
    wait(lambda: by_id("title").text.startswith("hello zebra"), "the hit to open")
    by_id("search").send_keys(Keys.CONTROL, "a")
    by_id("search").send_keys(Keys.BACKSPACE)
    wait(lambda: "conversations" in by_id("conversation-count").text, "the list back after the search is cleared")

    # Load earlier: a conversation of 130 messages shows the newest 60, then 60 more, then the rest.
    open_conversation("long history")
    count = lambda: len(driver.find_elements(By.CSS_SELECTOR, "article.message"))
    wait(lambda: count() == 60, "the newest 60 messages")
    check(driver.find_elements(By.CSS_SELECTOR, "article.message")[0].get_attribute("data-sequence") == "70", "the newest 60 start at #70")
    by_id("load-earlier").click()
    wait(lambda: count() == 120, "60 earlier messages")
    by_id("load-earlier").click()
    wait(lambda: count() == 130, "the rest")
    check(not by_id("load-earlier").is_displayed(), "no more to load")

    # The notice when older turns were left out: a question in the long conversation sends 39 of its 65 turns.
    send("one more")
    wait(lambda: last_answer().get_attribute("data-state") == "complete" and "one more" in last_answer().text, "the answer in the long conversation")
    notice = last_answer().find_element(By.CSS_SELECTOR, ".notice").text
    check("left out of the model's context" in notice, f"the notice says older turns were left out: {notice}")

    # Rename.
    by_id("rename").click()
    field = by_id("rename-input")
    field.clear()
    field.send_keys("Renamed history")
    by_id("rename-ok").click()
    wait(lambda: by_id("title").text == "Renamed history", "the new title")
    wait(lambda: "Renamed history" in sidebar_titles(), "the new title in the sidebar")

    # Delete with confirmation: Cancel keeps it, Delete removes it.
    open_conversation("topic 50")
    by_id("delete").click()
    check(by_id("delete-dialog").is_displayed() and "topic 50" in by_id("delete-text").text, "deleting asks first")
    by_id("delete-cancel").click()
    check(by_id("title").text == "topic 50" and "topic 50" in sidebar_titles(), "Cancel keeps the conversation")
    by_id("delete").click()
    by_id("delete-ok").click()
    wait(lambda: "topic 50" not in sidebar_titles() and by_id("title").text == "New conversation", "the conversation to go")

    # A draft saved as you type, and everything restored by a reload.
    open_conversation("Renamed history")
    by_id("input").send_keys("an unsent web draft")
    wait(lambda: by_id("status").text == "draft saved", "the draft to be saved")
    shown = count()
    driver.refresh()  # the same address: it names the open conversation
    wait(lambda: driver.execute_script("return document.body.dataset.ready") == "true", "the page to start again")
    wait(lambda: by_id("title").text == "Renamed history", "the reload to reopen the conversation")
    wait(lambda: by_id("input").get_attribute("value") == "an unsent web draft", "the draft after the reload")
    first = driver.find_elements(By.CSS_SELECTOR, "article.message")[0].get_attribute("data-sequence")
    check(count() == 60 and shown == 60 and first == "72", f"the newest 60 of the 132 messages after the reload ({count()}, from #{first})")
    check(Select(by_id("model")).first_selected_option.text == "alpha", "the model choice survives the reload")
    titles = sidebar_titles()
    check("topic 50" not in titles and "Renamed history" in titles and any(t.startswith("hello zebra") for t in titles),
          "the sidebar after the reload")
    open_conversation(next(t for t in titles if t.startswith("hello zebra")))
    wait(lambda: [a.get_attribute("data-state") for a in answers()] == ["complete", "interrupted", "complete", "complete"],
         "the answers after the reload")
    check(len(driver.find_elements(By.CSS_SELECTOR, "article.message.user img.attached")) == 3, "the images after the reload")
    shot("restored")
    print("ok: all", flush=True)
except Exception as error:
    shot("failure")
    print(f"FAILED: {error}", flush=True)
    try:
        print(driver.find_element(By.TAG_NAME, "body").text[:4000])
        print(json.dumps(driver.get_log("browser"))[:4000])
    except Exception:
        pass
    driver.quit()
    sys.exit(1)
driver.quit()
