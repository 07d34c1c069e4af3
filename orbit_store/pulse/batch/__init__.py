"""The set path of an attempt batch (``pulse.batches``): the common starts (``start_set``) and
completions (``complete_set``) of a batch judged from reads made once and applied with grouped
conditional UPDATEs, answering exactly what the item-by-item path would (invariants 3, 4).

The item types (``items``) live apart so the set path never imports the module that runs it.
"""
