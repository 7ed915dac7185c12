"""finops: the analytics package behind the LLM-fleet FinOps dashboard.

Pure Python + DuckDB + numpy/scipy; never imports streamlit. The dashboard
pages and the ``python -m finops`` CLI are two thin faces over it.
"""
__version__ = "0.1.0"
