"""Selection: the k tools most likely to do a task, each score explained.

The stage reads the tenant's tools from the store into an in-memory index
(``index.py``: BM25 in ``lexical.py``, vectors in ``vectors.py``, an HNSW graph in
``ann.py`` past ``select_ann_min_tools``), ranks a pool (``retrieval.py``) and
orders it with the tools' observed statistics (``select.py``). Skills are ranked
the same way, exactly and in process (``skills.py``). It imports only the stores,
the embedders and the shared core.
"""

from __future__ import annotations

from .select import Filters, Selector, Weights, check_request

__all__ = ["Filters", "Selector", "Weights", "check_request"]
