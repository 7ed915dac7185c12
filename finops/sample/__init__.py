"""The sample fleet: synthetic but realistic traffic, and the demo store built from it.

Modules
-------
``synth``  a deterministic two-week request log of an LLM fleet (token lengths fitted to the Azure traces, H100
           speeds from Lambda's vLLM benchmark: sources in its docstring), with incidents
``demo``   build the demo store from it (``python -m finops demo``)
"""
__all__ = ["demo", "synth"]
