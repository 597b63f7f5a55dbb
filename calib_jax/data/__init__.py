"""Data: the AdAuction-like simulator, the CTR backbone, the Open Bandit loader, splits."""
