// Badge paths live in their own module, which the client shares; every user of BadgeCore sees
// them as part of it.
@_exported public import BadgePaths
