"""Debian's chromium as the console's browser tests and ``bench/console/console.py`` launch it
through Playwright: the system binary (never a downloaded browser), headless, quiet."""

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
