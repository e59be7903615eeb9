"""The project's scripts under tools/, loaded as modules for the tests that check them."""

import importlib.util
import os

SCENARIOS = os.environ.get("EPLB_SCENARIOS",
                           os.path.join(os.path.dirname(__file__), "../../scenarios"))


def load_tool(name):
    """tools/NAME.py as a module (its main() not run)."""
    path = os.path.join(SCENARIOS, "..", "tools", name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
