"""What every place that calls extension code shares: attribution, cancellation origin, exits.

A failing, cancelling, exiting or loop-blocking extension is named and contained the same way
at each boundary (notifications, middleware, services, loading): its diagnostics
(``diagnostics``), whose cancellation it is (``origin``), ``KeyboardInterrupt``/``SystemExit``
as its own failure (``exits``) and the watchdog that names a hook blocking the loop
(``loopwatch``). Nothing here imports the rest of the extension runtime.
"""
