"""Generated from proto/kioku/v1 by client/python/generate.py. DO NOT EDIT."""
