"""The pure core: template evaluation, graphs and decisions. No database, network or clock."""
