# The data-science namespace of the wake-e2e section: frames, a fitted model, seaborn figures.
import matplotlib
matplotlib.use("Agg")
import numpy as np, pandas as pd, matplotlib
import matplotlib.pyplot as plt, seaborn as sns
from sklearn.ensemble import RandomForestRegressor
from sklearn.model_selection import train_test_split
rng = np.random.default_rng(0)
n = 100_000
df_train = pd.DataFrame({"SalePrice": rng.normal(180000, 40000, n), "GrLivArea": rng.normal(1500, 400, n),
    "OverallQual": rng.integers(1, 11, n), "Neighborhood": rng.choice(["NAmes", "CollgCr", "OldTown", "Edwards"], n),
    "YearBuilt": rng.integers(1900, 2010, n)})
for i in range(20):
    df_train["f%d" % i] = rng.normal(size=n)
df_train["desc"] = ["house %d in %s" % (i, s) for i, s in zip(range(n), df_train.Neighborhood)]
df_test = df_train.sample(20_000, random_state=0).drop(columns=["SalePrice"])
corrmat = df_train.select_dtypes("number").corr()
X = df_train.select_dtypes("number").drop(columns=["SalePrice"]).values
y = df_train.SalePrice.values
X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.2, random_state=0)
model = RandomForestRegressor(n_estimators=20, max_depth=8, random_state=0).fit(X_tr[:20000], y_tr[:20000])
pred = model.predict(X_te)
f, ax = plt.subplots(figsize=(8, 6))
fig = sns.boxplot(x="OverallQual", y="SalePrice", data=df_train.iloc[:5000])
f2, ax2 = plt.subplots(figsize=(12, 9))
sns.heatmap(corrmat, vmax=.8, square=True, ax=ax2)
scatter_ax = sns.scatterplot(x=df_train.GrLivArea[:3000], y=df_train.SalePrice[:3000])
