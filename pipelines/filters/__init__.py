"""Filters beyond the built-in row rules, one module each; every module here is registered.

A module in this package that defines a `@register`ed `Filter` is a stage `clean` can list
under `stages:` (pipelines/base.py). None of them runs unless listed.
"""
