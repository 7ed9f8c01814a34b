"""Passes over hawk IR: checks, analysis, lowering, and the pipeline that runs them in order."""
