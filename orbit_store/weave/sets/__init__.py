"""The inbox and timer loops' set transactions: many instances decided in one transaction, each
instance's writes held back (``weave.buffered``) and written for the set at once
(``weave.set_writes``); ``set_pass`` groups a loop's due instances into sets and runs them."""
