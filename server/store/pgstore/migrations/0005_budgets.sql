-- Version 5: budget counts (docs/budgets.md). One row per (tenant, budget), holding a
-- BudgetUsageRecord for the current period; AddBudgetUsage locks the row (inserting
-- it first when it is missing) before it reads and rewrites it, so that replicas
-- adding to one budget at once add one after the other.
CREATE TABLE budget_usage (
  tenant text  NOT NULL,
  budget text  NOT NULL,
  rec    bytea NOT NULL,
  PRIMARY KEY (tenant, budget)
);
