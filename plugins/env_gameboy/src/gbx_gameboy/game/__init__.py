"""gbx quest, the project's own Game Boy game: world data, art, build, scripted solutions."""
