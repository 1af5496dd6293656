"""Adapters that run a hopwise strategy inside other toolkits. Each lives in its own module and
needs its toolkit installed (``pip install "hopwise[llamaindex]"``, ``"hopwise[dspy]"``); importing
this package needs neither."""
