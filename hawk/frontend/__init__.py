"""The front end: Python AST -> hawk IR (syntax in visitor.py, typing rules in values.py)."""
