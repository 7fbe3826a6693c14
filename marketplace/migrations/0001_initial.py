# ruff: noqa: RUF012  (the migration framework reads these class attributes)
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="MarketSummary",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=50, unique=True)),
                ("listings", models.PositiveIntegerField(default=0)),
                ("pending_sales", models.PositiveIntegerField(default=0)),
                ("taken_at", models.DateTimeField(null=True)),
                ("fence", models.BigIntegerField(default=0)),
            ],
        ),
    ]
