__all__: list[str] = []  # a namespace: import the modules inside
