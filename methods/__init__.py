"""One folder per paper: ``methods/<paper>/`` holds the method and everything specific to it, and
declares what it provides in its ``__init__.py`` (``PLUGIN = harness.plugins.Plugin(...)``)."""
