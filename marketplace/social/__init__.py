"""Guild, contacts, guild mail and group chat pages of the demo site."""
