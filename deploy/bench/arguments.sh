# shellcheck shell=bash
# Sourced by the bench scripts of this folder: their shared checks of the command line.

# require_whole_numbers SCRIPT NAMES VALUE…: exits 2 with a sentence unless every VALUE is a
# whole number (digits only). NAMES says which arguments they are ("EVENTS and USERS").
require_whole_numbers() {
  local script=$1 names=$2 value
  shift 2
  for value in "$@"; do
    case $value in
      '' | *[!0-9]*) echo "$script: $names must be whole numbers, not '$value'" >&2; exit 2 ;;
    esac
  done
}
