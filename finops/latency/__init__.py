"""finops.latency.stats"""
