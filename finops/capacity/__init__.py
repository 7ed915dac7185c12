"""finops.capacity.planner"""
