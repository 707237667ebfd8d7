"""Tools for the RTX PRO 6000 Blackwell LLM Wiki."""

__version__ = "0.1.0"
