"""Refuse to start process workers from the unguarded top level of a script.

Process workers are started with multiprocessing's ``spawn`` (distributed's default) or
``forkserver`` method, and each new process re-imports the main script as ``__mp_main__`` before
it runs anything. A script that calls :func:`dkernel.connect` at its top level, outside
``if __name__ == "__main__":``, would then start a cluster again inside every worker while it is
still bootstrapping; multiprocessing refuses, and all the user sees is distributed's
``RuntimeError: Nanny failed to start.``. :func:`check_main_guard` finds that situation before
any process starts and says what to change.

The check mirrors what ``multiprocessing.spawn`` re-imports: nothing for ``python -c``, stdin,
notebooks or ``python -m pkg`` (a package's ``__main__``); the main script's file otherwise.
It only raises when the call is on the stack of that script's module-level code *and* the line
executing there is not inside an ``if __name__ == "__main__":`` block, so pytest, the ``dkernel``
command and guarded scripts are never affected.
"""

from __future__ import annotations

import ast
import sys
from types import FrameType, ModuleType

from dkernel.errors import UnguardedMainError

REIMPORTING_METHODS = ("spawn", "forkserver")


def check_main_guard(start_method: str, *, frame: FrameType | None = None) -> None:
    """Raise when starting process workers would re-run the caller's unguarded script.

    Parameters
    ----------
    start_method : str
        The multiprocessing start method the workers will use (``spawn``, ``forkserver`` or
        ``fork``); ``fork`` does not re-import the main module and is never refused.
    frame : frame, optional
        Where to start walking the stack (default: the caller's frame).

    Raises
    ------
    UnguardedMainError
        When the main script is executing its top level, outside its ``__main__`` guard.
    """
    if start_method not in REIMPORTING_METHODS:
        return
    main = sys.modules.get("__main__")
    if main is None or not _reimported_by_workers(main):
        return
    module_frame = _main_module_frame(main, frame or sys._getframe(1))
    if module_frame is None:
        return
    path = module_frame.f_code.co_filename
    line = module_frame.f_lineno
    if line is None or _in_main_guard(path, line) is not False:
        return
    raise UnguardedMainError(
        f"dkernel.connect() is starting a local Dask cluster from the top level of the script "
        f'{path} (line {line}), outside an `if __name__ == "__main__":` block. Its worker '
        f"processes are started with multiprocessing '{start_method}' and each one re-imports "
        "the script before it runs, which would start a cluster again inside every worker "
        "(distributed then fails with 'Nanny failed to start'). Put the code that connects and "
        'computes under `if __name__ == "__main__":` (move it into a main() function called '
        "there), or use threads instead of processes with dkernel.connect(processes=False), "
        'or connect to a running scheduler with dkernel.connect("tcp://host:8786").'
    )


def _reimported_by_workers(main: ModuleType) -> bool:
    """Whether ``multiprocessing.spawn`` re-imports this main module in a child process."""
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None)
    if name is not None:
        # `python -m pkg` runs pkg.__main__, which multiprocessing deliberately skips
        return not (name == "__main__" or name.endswith(".__main__"))
    return getattr(main, "__file__", None) is not None


def _main_module_frame(main: ModuleType, frame: FrameType | None) -> FrameType | None:
    """The frame executing the main module's top-level code, if it is on the stack."""
    namespace = vars(main)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is namespace:
            return frame
        frame = frame.f_back
    return None


def _in_main_guard(path: str, line: int) -> bool | None:
    """Whether ``line`` of ``path`` lies in an ``if __name__ == "__main__":`` branch.

    None when the source cannot be read or parsed (then nothing is refused).
    """
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        branch = _guarded_branch(node)
        if branch and branch[0].lineno <= line <= (branch[-1].end_lineno or line):
            return True
    return False


def _guarded_branch(node: ast.If) -> list[ast.stmt]:
    """The statements that run only in the main process: ``if __name__ == "__main__":``'s
    body (either operand order), or the ``else`` of ``if __name__ != "__main__":``."""
    test = node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return []
    operands = {_operand(test.left), _operand(test.comparators[0])}
    if operands != {"name", "main"}:
        return []
    if isinstance(test.ops[0], ast.Eq):
        return node.body
    if isinstance(test.ops[0], ast.NotEq):
        return node.orelse
    return []


def _operand(expr: ast.expr) -> str | None:
    if isinstance(expr, ast.Name) and expr.id == "__name__":
        return "name"
    if isinstance(expr, ast.Constant) and expr.value == "__main__":
        return "main"
    return None
